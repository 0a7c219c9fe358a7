"""The fp8 GEMM through `torch._scaled_mm` (cuBLASLt), which the PyTorch backend and the cuBLAS
backend both run: cuBLASLt's fp8 matmul is the only fp8 GEMM cuBLAS has, and PyTorch calls it.

A module of its own, shared by both, so that neither backend imports the other; its operands and
check come from the reference layer (kernels/reference/), as every backend's do."""

from __future__ import annotations

import torch

from .... import padding
from ....catalog import GemmKernel
from ....precision import Precision
from ....reference.gemm import operands
from ....reference.torch_checks import check_matmul
from ...contract.base import Prepared, TimedPart, Unsupported
from ...shared.torch_context import TorchContext

FP8_MULTIPLE = 16  # cuBLASLt fp8 GEMM (torch._scaled_mm) needs every dimension a multiple of 16
FP8_DTYPE = torch.float8_e4m3fn


def prepare_fp8(ctx: TorchContext, kernel: GemmKernel) -> Prepared:
    """fp8 e4m3 inputs with per-tensor scales through torch._scaled_mm (cuBLASLt), bf16 output.

    cuBLASLt's fp8 GEMM accepts only the TN layout (A transposed, B not), so only DeepBench's
    TN kernels are run as DeepBench gave them; other layouts would change the problem."""
    from .facts import fp8_supported

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
