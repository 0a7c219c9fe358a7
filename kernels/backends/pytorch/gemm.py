"""Dense GEMM on PyTorch (MKL/oneDNN on CPU, cuBLAS/cuBLASLt on CUDA).

DeepBench's problem is column-major C (m x n) = op(A) op(B); the operands are laid out so that
the library call PyTorch makes is exactly DeepBench's (transa, transb, m, n, k): X (n x k) @ Y (k x m)
= C in column-major (kernels/reference/gemm.py `operands` says how). fp8 goes through cuBLASLt
(../fp8_gemm.py, which the cuBLAS backend runs too). `tests/benchmarks/` shows the call with
cuBLAS's own logging.
"""

from __future__ import annotations

import torch

from ... import padding
from ...catalog import GemmKernel
from ...precision import Precision
from ...reference.gemm import operands
from ...reference.torch_checks import check_matmul
from ..contract.base import Prepared, TimedPart
from ..gpu.cuda.fp8_gemm import prepare_fp8
from ..shared.torch_context import TorchContext


def prepare(ctx: TorchContext, kernel: GemmKernel, precision: Precision) -> Prepared:
    if precision is Precision.FP8:
        return prepare_fp8(ctx, kernel)
    listed = {"m": kernel.m, "n": kernel.n, "k": kernel.k}
    shape = padding.resolve(
        ctx.pad, listed, padding.gemm_shape(kernel.m, kernel.n, kernel.k, kernel.a_t, kernel.b_t, precision)
    )
    m, n, k = shape["m"], shape["n"], shape["k"]
    info: dict[str, object] = {}
    if precision is Precision.INT8:
        m, n, k, limits = ctx.int8_gemm_shape(m, n, k)
        if limits:  # beyond DeepBench's padding: what torch._int_mm itself needs (another problem)
            info["library_padding"] = {**limits, "why": "torch._int_mm on CUDA needs n > 16 and k, m multiples of 8"}
    dtype = ctx.dtype(precision)
    x, y = operands(ctx, m, n, k, kernel.a_t, kernel.b_t, dtype)
    if precision is Precision.INT8:
        out = torch.empty((n, m), dtype=torch.int32, device=ctx.device)

        def run() -> None:
            torch._int_mm(x, y, out=out)
    else:
        out = torch.empty((n, m), dtype=dtype, device=ctx.device)

        def run() -> None:
            torch.mm(x, y, out=out)

    part = TimedPart(
        direction="fwd",
        run=run,
        check=lambda: check_matmul(out, x, y, precision, ctx.generator),
        flops=kernel.flops(),
        min_bytes=kernel.min_bytes("fwd", precision),
        info={
            "blas_call": {
                "transa": "T" if kernel.a_t else "N",
                "transb": "T" if kernel.b_t else "N",
                "m": m,
                "n": n,
                "k": k,
            },
            **info,
        },
    )
    return Prepared(parts=[part], padding=padding.changed(listed, {"m": m, "n": n, "k": k}))
