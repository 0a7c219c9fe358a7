"""Dense GEMM on onnxruntime: fp32 through MatMul, int8 through MatMulInteger (int8 x int8 ->
int32, exact integer accumulate, no requantization; weights in [-127, 127]: kernels/reference/int8_operands.py).

DeepBench's column-major problem C (m x n) = op(A) op(B) is computed as its row-major transpose
C^T (n x m) = op(B)^T op(A)^T: the graph input X = op(B)^T (n x k, the activations, bound at run
time) times the initializer W = op(A)^T (k x m, the weights, a constant the runtime may prepack).
The output buffer (n x m row-major) is C in DeepBench's column-major layout. onnxruntime's MLAS
picks its own kernels for the shape; there is no BLAS call to mirror."""

from __future__ import annotations

import numpy as np
from onnx import helper

from ...catalog import GemmKernel
from ...precision import Precision
from ...reference.numpy_checks import check_matmul
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import OrtContext

OPS = {Precision.FP32: "MatMul", Precision.INT8: "MatMulInteger"}


def prepare(ctx: OrtContext, kernel: GemmKernel, precision: Precision) -> Prepared:
    if precision not in OPS:
        raise Unsupported(
            f"onnxruntime GEMM runs fp32 (MatMul) and int8 with int32 accumulate (MatMulInteger); "
            f"{precision.value} is not run by this backend"
        )
    m, n, k = kernel.m, kernel.n, kernel.k
    x = ctx.random((n, k), precision)
    w = ctx.weights((k, m), precision, scale=k**-0.5)
    out = np.empty((n, m), dtype=np.int32 if precision is Precision.INT8 else np.float32)
    node = helper.make_node(OPS[precision], ["x", "w"], ["y"])
    call = ctx.bound(node, {"x": x}, {"y": out}, {"w": w})
    part = TimedPart(
        direction="fwd",
        run=call,
        check=lambda: check_matmul(out, x, w, precision, ctx.rng),
        flops=kernel.flops(),
        min_bytes=kernel.min_bytes("fwd", precision),
        capturable=False,
        info={"operator": OPS[precision], "weights": "initializer (constant)", "providers": list(call.providers)},
    )
    return Prepared(parts=[part])
