"""The onnxruntime backend: single-operator ONNX models built at run time, run on the CPU
execution provider (or the first other provider the installed build offers, when the
settings ask for it), timed with the host clock around a pre-bound `run_with_iobinding`.

Usable on ARM (the Raspberry Pi image) and on x86, so the same kernel can be compared across
runtimes (torch vs onnxruntime vs TFLite) on one machine."""
