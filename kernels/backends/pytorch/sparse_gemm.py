"""Sparse GEMM on PyTorch (MKL sparse on CPU, cuSPARSE on CUDA): CSR A (m x k) at the kernel's
sparsity times dense B (k x n), with the dense GEMM of the same shape timed beside it so the
result reports the speedup sparsity buys on this library."""

from __future__ import annotations

from typing import Any

import torch

from ...catalog import GemmKernel, SparseGemmKernel
from ...precision import Precision
from ...reference.torch_checks import check_matmul
from ..contract.base import Prepared, TimedPart, Unsupported
from ..shared.torch_context import TorchContext
from .gemm import prepare as prepare_dense

SPARSE_PRECISIONS = (Precision.FP32, Precision.FP16, Precision.BF16)


def prepare(ctx: TorchContext, kernel: SparseGemmKernel, precision: Precision) -> Prepared:
    if precision not in SPARSE_PRECISIONS or (not ctx.is_cuda and precision is not Precision.FP32):
        raise Unsupported(
            f"sparse GEMM (CSR) in {precision.value} is not supported by PyTorch on "
            f"{ctx.device.type}; use fp32" + (", fp16 or bf16" if ctx.is_cuda else "")
        )
    if kernel.a_t or kernel.b_t:
        raise Unsupported("transposed sparse operands are not in DeepBench's sparse sets")
    dtype = ctx.dtype(precision)
    dense_a = ctx.random((kernel.m, kernel.k), dtype)
    keep = torch.rand((kernel.m, kernel.k), device=ctx.device, generator=ctx.generator) >= kernel.sparsity
    dense_a = dense_a * keep.to(dtype)
    a_csr = dense_a.to_sparse_csr()
    b = ctx.random((kernel.k, kernel.n), dtype)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["c"] = torch.sparse.mm(a_csr, b) if not ctx.is_cuda else torch.mm(a_csr, b)

    # out["c"] is (m x n) = A @ B; check against the dense product A @ B.
    part = TimedPart(
        "fwd",
        run,
        lambda: check_matmul(out["c"].to_dense(), dense_a, b, precision, ctx.generator),
        kernel.flops(),
        kernel.min_bytes("fwd", precision),
        info={"nnz": int(a_csr.values().numel()), "format": "csr"},
        capturable=ctx.is_cuda,
    )

    def dense_beside(backend: Any, rule: Any) -> dict[str, Any]:
        dense = GemmKernel(
            set=kernel.set, index=kernel.index, m=kernel.m, n=kernel.n, k=kernel.k, a_t=kernel.a_t, b_t=kernel.b_t
        )
        dense_part = prepare_dense(ctx, dense, precision).in_precision(precision).parts[0]
        dense_part.run()
        m = backend.measure(dense_part.run, rule, dense_part)
        return {
            "dense_time_us": m.stats.model_dump(),
            "dense_tflops": dense.flops() / m.stats.median / 1e6,
            "dense_check": dense_part.check().model_dump(),
        }

    return Prepared(parts=[part], after=dense_beside)
