"""GEMM operands laid out so that their memory is DeepBench's column-major matrices.

DeepBench's problem is column-major C (m x n) = op(A) op(B). PyTorch is row-major and hands the
BLAS the transposed problem, so the operands are laid out such that the library call it makes is
exactly DeepBench's (transa, transb, m, n, k):

    out (n x m, row-major)  =  X (n x k)  @  Y (k x m)      i.e.  C = A B in column-major,

with Y standing for A and X for B: a column-major m x k A (lda = m) is the same memory as a
row-major k x m tensor, and a transposed A (stored k x m column-major) is a row-major m x k
tensor seen through .t(), which the library receives as transa = T. Likewise for B.

Here, apart from every backend, because the PyTorch backend (torch.mm on X and Y) and the cuBLAS
backend (cublasGemmEx on their memory) both run on them, and the float64 check (torch_checks.py)
multiplies the same row-major views: one layout, one reference, whichever library is under test."""

from __future__ import annotations

import torch

from .context import TensorSource


def operands(
    ctx: TensorSource, m: int, n: int, k: int, a_t: bool, b_t: bool, dtype: torch.dtype, narrow: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(X, Y) with X @ Y = B^T-as-rows @ A-as-rows, so the BLAS sees DeepBench's problem.
    `narrow`: drawn for a narrower type than `dtype` (fp8, rounded from float32; context.random)."""
    a_store = ctx.random((m, k) if a_t else (k, m), dtype, narrow=narrow)
    b_store = ctx.random((k, n) if b_t else (n, k), dtype, narrow=narrow)
    y = a_store.t() if a_t else a_store
    x = b_store.t() if b_t else b_store
    return x, y
