"""Sparse GEMM on onnxruntime: not run, with the reason.

The standard ONNX operator set has no sparse matrix product: a sparse initializer is densified
when the session loads, so timing it would time a dense MatMul under a sparse name. The only
sparse kernel is the contrib operator com.microsoft.SparseToDenseMatMul, fed through OrtValue
sparse tensors; this backend does not drive it."""

from __future__ import annotations

from ...catalog import SparseGemmKernel
from ...precision import Precision
from ..contract.base import Prepared, Unsupported
from .context import OrtContext

REASON = (
    "onnxruntime has no sparse matrix product among the standard ONNX operators (a sparse initializer "
    "is densified at load); use --backend tflite (sparse fully connected) or torch"
)


def prepare(ctx: OrtContext, kernel: SparseGemmKernel, precision: Precision) -> Prepared:
    raise Unsupported(REASON)
