"""Batched GEMM (BatchedGemmKernel) through torch.bmm: cuBLAS's strided-batched GEMM on CUDA,
MKL/oneDNN's batch GEMM on a CPU.

Each batch entry is laid out as gemm.py lays out one GEMM, so the library sees DeepBench's
column-major (transa, transb, m, n, k) for every entry: out[i] (n x m, row-major) = X[i] @ Y[i].
The check compares the first and the last entry with a float64 product (Freivalds' check when
one entry is large, as for GEMM): a library that skipped or mixed up entries fails it."""

from __future__ import annotations

import torch

from ...layers import BatchedGemmKernel
from ...precision import Precision
from ...reference.numpy_checks import check_batch_ends
from ...reference.torch_checks import check_matmul
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from ..shared.torch_context import TorchContext

FLOAT_PRECISIONS = (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16)


def operands(ctx: TorchContext, kernel: BatchedGemmKernel, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(X, Y), each batch-major, with X[i] @ Y[i] = DeepBench's C for entry i (see gemm.operands)."""
    b, m, n, k = kernel.batch, kernel.m, kernel.n, kernel.k
    a_store = ctx.random((b, m, k) if kernel.a_t else (b, k, m), dtype)
    b_store = ctx.random((b, k, n) if kernel.b_t else (b, n, k), dtype)
    y = a_store.transpose(1, 2) if kernel.a_t else a_store
    x = b_store.transpose(1, 2) if kernel.b_t else b_store
    return x, y


def prepare(ctx: TorchContext, kernel: BatchedGemmKernel, precision: Precision) -> Prepared:
    if precision not in FLOAT_PRECISIONS:
        raise Unsupported(
            f"batched GEMM in {precision.value} is not implemented on the torch backend "
            "(torch.bmm has no integer or fp8 form); it runs fp32, tf32 (CUDA), fp16 and bf16"
        )
    dtype = ctx.dtype(precision)
    x, y = operands(ctx, kernel, dtype)
    out = torch.empty((kernel.batch, kernel.n, kernel.m), dtype=dtype, device=ctx.device)

    def run() -> None:
        torch.bmm(x, y, out=out)

    def check() -> Check:
        return check_batch_ends(lambda i: check_matmul(out[i], x[i], y[i], precision, ctx.generator), kernel.batch)

    part = TimedPart(
        direction="fwd",
        run=run,
        check=check,
        flops=kernel.flops(),
        min_bytes=kernel.min_bytes("fwd", precision),
        info={
            "blas_call": {
                "batch": kernel.batch,
                "transa": "T" if kernel.a_t else "N",
                "transb": "T" if kernel.b_t else "N",
                "m": kernel.m,
                "n": kernel.n,
                "k": kernel.k,
            }
        },
    )
    return Prepared(parts=[part])
