"""Whole-model runs (op "model", kernels/model_kernel.py) on TFLite: not run, with the reason.

The interpreter (tflite-runtime) runs .tflite flatbuffers only; a registered model would have to
be converted from PyTorch, and every converter to TFLite (TensorFlow's TFLiteConverter, directly
or after onnx-tf; ai-edge-torch, which lowers through TensorFlow's converter) needs TensorFlow,
which neither the ARM image nor the device environment carries. This backend writes
single-operator models itself (flatbuffer.py); writing whole networks that way would be a model
converter of its own, which this tool does not attempt.
"""

from __future__ import annotations

from ...model_kernel import ModelKernel
from ...precision import Precision
from ..base import Prepared, Unsupported

REASON = ("a whole model on TFLite needs it converted to a .tflite file, and converting from PyTorch needs "
          "TensorFlow's converter (directly, via onnx-tf, or inside ai-edge-torch), which this image does not "
          "carry: tflite-runtime is the interpreter only; the whole model runs on the torch backend, and on "
          "onnxruntime where PyTorch is installed to export it")


def prepare(ctx: object, kernel: ModelKernel, precision: Precision) -> Prepared:
    raise Unsupported(REASON)
