"""Dense GEMM on PyTorch (MKL/oneDNN on CPU, cuBLAS/cuBLASLt on CUDA).

DeepBench's problem is column-major C (m x n) = op(A) op(B). PyTorch is row-major and hands the
BLAS the transposed problem, so we lay the operands out such that the library call it makes is
exactly DeepBench's (transa, transb, m, n, k):

    out (n x m, row-major)  =  X (n x k)  @  Y (k x m)      i.e.  C = A B in column-major,

with Y standing for A and X for B: a column-major m x k A (lda = m) is the same memory as a
row-major k x m tensor, and a transposed A (stored k x m column-major) is a row-major m x k
tensor seen through .t(), which the library receives as transa = T. Likewise for B.
`tests/benchmarks/` shows the call with cuBLAS's own logging.
"""

from __future__ import annotations

import torch

from ... import padding
from ...catalog import GemmKernel
from ...precision import Precision
from ..base import Prepared, TimedPart, Unsupported
from .checks import check_matmul
from .context import TorchContext

FP8_MULTIPLE = 16  # cuBLASLt fp8 GEMM (torch._scaled_mm) needs every dimension a multiple of 16
FP8_DTYPE = torch.float8_e4m3fn


def operands(
    ctx: TorchContext, m: int, n: int, k: int, a_t: bool, b_t: bool, dtype: torch.dtype, narrow: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(X, Y) with X @ Y = B^T-as-rows @ A-as-rows, so the BLAS sees DeepBench's problem.
    `narrow`: drawn for a narrower type than `dtype` (fp8, rounded from float32; context.random)."""
    a_store = ctx.random((m, k) if a_t else (k, m), dtype, narrow=narrow)
    b_store = ctx.random((k, n) if b_t else (n, k), dtype, narrow=narrow)
    y = a_store.t() if a_t else a_store
    x = b_store.t() if b_t else b_store
    return x, y


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


def prepare_fp8(ctx: TorchContext, kernel: GemmKernel) -> Prepared:
    """fp8 e4m3 inputs with per-tensor scales through torch._scaled_mm (cuBLASLt), bf16 output.

    cuBLASLt's fp8 GEMM accepts only the TN layout (A transposed, B not), so only DeepBench's
    TN kernels are run as DeepBench gave them; other layouts would change the problem."""
    from ..cuda_facts import fp8_supported

    if not ctx.is_cuda or not fp8_supported(ctx.device):
        raise Unsupported("fp8 GEMM needs an NVIDIA GPU of compute capability 8.9 or newer (cuBLASLt fp8)")
    layout = ("T" if kernel.a_t else "N") + ("T" if kernel.b_t else "N")
    if layout != "TN":
        raise Unsupported(
            f"cuBLASLt fp8 GEMM supports only the TN layout; this kernel is {layout} "
            "(transposing an operand would change DeepBench's problem)"
        )
    listed = {"m": kernel.m, "n": kernel.n, "k": kernel.k}
    shape = {name: padding.pad_to(v, FP8_MULTIPLE) for name, v in listed.items()}
    m, n, k = shape["m"], shape["n"], shape["k"]
    x, y = operands(ctx, m, n, k, kernel.a_t, kernel.b_t, torch.float32, narrow=True)
    x8, y8 = x.to(FP8_DTYPE), y.t().contiguous().t().to(FP8_DTYPE) if not y.t().is_contiguous() else y.to(FP8_DTYPE)
    one = torch.ones((), device=ctx.device)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["c"] = torch._scaled_mm(x8, y8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    # Reference: the product of the fp8-rounded inputs, so the check measures the GEMM, not the rounding.
    part = TimedPart(
        direction="fwd",
        run=run,
        check=lambda: check_matmul(out["c"], x8.float(), y8.float(), Precision.FP8, ctx.generator),
        flops=kernel.flops(),
        min_bytes=kernel.min_bytes("fwd", Precision.FP8),
        info={
            "blas_call": {"transa": "T", "transb": "N", "m": m, "n": n, "k": k},
            "library": "cuBLASLt via torch._scaled_mm",
            "scales": "per-tensor 1.0",
        },
    )
    return Prepared(parts=[part], padding=padding.changed(listed, shape))
