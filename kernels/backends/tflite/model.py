"""Whole-model runs (op "model", kernels/model_kernel.py) on TFLite: not run, with the reason.

The interpreter (LiteRT) runs .tflite flatbuffers only; a registered model would have to be
converted from PyTorch. Today's converter, litert-torch (formerly ai-edge-torch), no longer needs
TensorFlow but brings LiteRT's converter with JAX, torchao, transformers and a PyTorch of its own
(several GB, a CUDA build on x86-64 and aarch64), far more than a board image should carry. This
backend writes single-operator models itself (flatbuffer.py); writing whole networks that way
would be a model converter of its own, which this tool does not attempt.
"""

from __future__ import annotations

from ...model_kernel import ModelKernel
from ...precision import Precision
from ..contract.base import Prepared, Unsupported

REASON = (
    "a whole model on TFLite must first be converted to a .tflite file, and this backend does not convert: "
    "it times the single-operator models it writes; converting from PyTorch needs litert-torch (LiteRT's "
    "converter with JAX, torchao and transformers), which this environment does not carry; the whole model "
    "runs on the torch backend, and on onnxruntime where PyTorch is installed to export it"
)


def prepare(ctx: object, kernel: ModelKernel, precision: Precision) -> Prepared:
    raise Unsupported(REASON)
