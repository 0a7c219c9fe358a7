"""The TFLite backend: single-operator .tflite models generated at run time (flatbuffer.py, no
TensorFlow), run by LiteRT's interpreter (`ai-edge-litert`, Google's maintained successor of
tflite-runtime: the XNNPACK delegate for what it takes, the builtin ruy/optimized kernels for the
rest), timed with the host clock around `invoke`. LiteRT is built against numpy 2, so it shares
the environment of every other backend.

The frozen tflite-runtime (2.14, numpy 1.x only) is not read: the model generator needs the
schema module that ships inside LiteRT's wheel (tflite-runtime ships none), so an install with
tflite-runtime alone could not build the models anyway; `pip install ai-edge-litert` replaces it
on the same Pis (aarch64, CPython 3.11/3.12)."""
