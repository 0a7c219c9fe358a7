"""Sparse GEMM on MKL's inspector-executor sparse BLAS, as DeepBench's code/intel/spmm/spmm_bench.cpp called it.

A (m x k, each entry zero with probability `sparsity`, the others random) in zero-based CSR with MKL_INT
(32-bit) indices is handed to `mkl_sparse_s_create_csr`; `mkl_sparse_set_mm_hint` (for n = 1
`mkl_sparse_set_mv_hint`: spmm_bench.cpp ran a vector product there) with DeepBench's 10 expected calls and
a general-matrix descriptor, then `mkl_sparse_optimize`, all before timing; the timed call is
`mkl_sparse_s_mm` (`mkl_sparse_s_mv`) into dense C, alpha = 1, beta = 0. Dense B is column-major k x n
(ldx = k) and C column-major m x n (ldy = m), as spmm_bench.cpp laid them out; a transposed A is the CSR of
the stored k x m matrix under SPARSE_OPERATION_TRANSPOSE, a transposed B (stored n x k column-major, that is
k x n row-major) runs SPARSE_LAYOUT_ROW_MAJOR, with C row-major then too (spmm_bench.cpp's rule).

What differs from spmm_bench.cpp, and each result says so: A's pattern follows DeepBench's sparse rule (as
the cuSPARSE backend's: each entry zero with probability `sparsity`) instead of its rows' counts drawn
around (1 - sparsity) k, and calls are timed warm by the harness, where it flushed the caches before each
of its 10 calls. The dense GEMM of the same shape is timed beside it by this backend's own cblas_sgemm
(the harness makes the speed-up)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...catalog import SparseGemmKernel
from ...precision import Precision
from ...reference.numpy_checks import check_matmul
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from . import binding as b
from .context import MklContext
from .declaration import SPARSE_CALLS, MklPartInfo, MklSparseCall
from .operands import aligned

EXPECTED_CALLS = 10  # spmm_bench.cpp's NRUN, its hint
INDEX = np.int32  # MKL_INT under the LP64 interface (binding.py)
DEPARTURES = (
    "A: each entry zero with probability sparsity (DeepBench's sparse rule; spmm_bench.cpp drew each row's count "
    "around (1 - sparsity) k); timed warm (spmm_bench.cpp flushed the caches before each of its 10 calls)"
)


class SparseProduct:
    """The CSR handle MKL inspected, the arrays it points to (create_csr does not copy them), and the call."""

    def __init__(
        self, mkl: b.Mkl, stored: np.ndarray, transposed: bool, row_major: bool, x: np.ndarray, y: np.ndarray
    ) -> None:
        """`stored`: A as stored (op(A) = stored^T when `transposed`); x and y: B and C, row-major when
        `row_major`, else column-major (each (columns, rows) row-major)."""
        self.mkl = mkl
        rows, cols = np.nonzero(stored)
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=stored.shape[0]))]).astype(INDEX)
        self.indices = cols.astype(INDEX)
        self.values = np.ascontiguousarray(stored[rows, cols], dtype=np.float32)
        self.x, self.y = x, y
        self.handle = ctypes.c_void_p()
        ptr = self.indptr.ctypes.data
        index_bytes = self.indptr.itemsize
        mkl.sparse(
            "mkl_sparse_s_create_csr",
            ctypes.byref(self.handle),
            b.SPARSE_INDEX_BASE_ZERO,
            stored.shape[0],
            stored.shape[1],
            ptr,
            ptr + index_bytes,
            self.indices.ctypes.data,
            self.values.ctypes.data,
        )
        self.op = b.SPARSE_OPERATION[transposed]
        self.layout = b.SPARSE_LAYOUT["row" if row_major else "column"]
        self.descr = b.general_descr()
        self.columns = x.shape[1] if row_major else x.shape[0]  # n
        self.vector = self.columns == 1
        self.ldx, self.ldy = x.shape[1], y.shape[1]
        self.hint_status = self._hint()
        mkl.sparse("mkl_sparse_optimize", self.handle)
        self.call = self._bind()
        mkl.sparse(self.routine, *self.args)  # once, its status read: the timed calls drop it

    @property
    def routine(self) -> str:
        return "mkl_sparse_s_mv" if self.vector else "mkl_sparse_s_mm"

    def _hint(self) -> str:
        """The hint's status: a hint MKL does not take leaves the product as it is (spmm_bench.cpp ignored it)."""
        lib = self.mkl.lib
        if self.vector:
            status = lib.mkl_sparse_set_mv_hint(self.handle, self.op, self.descr, EXPECTED_CALLS)
        else:
            hint = lib.mkl_sparse_set_mm_hint
            status = hint(self.handle, self.op, self.descr, self.layout, self.columns, EXPECTED_CALLS)
        return "SPARSE_STATUS_SUCCESS" if status == b.SPARSE_SUCCESS else b.SPARSE_STATUS.get(status, str(status))

    def _bind(self) -> Any:
        x, y = self.x.ctypes.data, self.y.ctypes.data
        if self.vector:
            self.args: tuple[Any, ...] = (self.op, 1.0, self.handle, self.descr, x, 0.0, y)
        else:
            self.args = (self.op, 1.0, self.handle, self.descr, self.layout, x, self.columns, self.ldx, 0.0, y)
            self.args += (self.ldy,)
        return getattr(self.mkl.lib, self.routine)

    def __call__(self) -> object:
        return self.call(*self.args)

    def __del__(self) -> None:
        handle = getattr(self, "handle", None)
        if handle is not None and handle.value:
            self.mkl.lib.mkl_sparse_destroy(handle)


def prepare(ctx: MklContext, kernel: SparseGemmKernel, precision: Precision) -> Prepared:
    if precision not in SPARSE_CALLS:
        raise Unsupported(
            f"MKL's sparse BLAS multiplies float32 (mkl_sparse_s_mm) and float64 matrices; "
            f"{precision.value} is run by no sparse routine of MKL"
        )
    m, n, k = kernel.m, kernel.n, kernel.k
    stored_shape = (k, m) if kernel.a_t else (m, k)
    stored = ctx.draw.values(stored_shape, precision, "a")
    stored[ctx.rng.random(stored_shape) < kernel.sparsity] = 0.0
    # x: B, column-major k x n (n x k row-major; ldx = k), or row-major k x n for a transposed B (ldx = n).
    x = aligned((k, n) if kernel.b_t else (n, k), np.float32)
    ctx.draw.into(x, precision, "b")
    y = aligned((m, n) if kernel.b_t else (n, m), np.float32)
    product = SparseProduct(ctx.mkl, stored, kernel.a_t, kernel.b_t, x, y)
    # The check's row-major views: out (n x m) = C^T, op(B)^T (n x k), op(A)^T (k x m).
    out, xb = (y.T, x.T) if kernel.b_t else (y, x)
    a_t = stored if kernel.a_t else stored.T

    def check() -> Check:
        return check_matmul(out, xb, a_t, precision, ctx.rng)

    part = TimedPart(
        "fwd",
        product,
        check,
        kernel.flops(),
        kernel.min_bytes("fwd", precision),
        info=part_info(ctx, kernel, product),
        capturable=False,
        output=y,
    )
    return Prepared(parts=[part])


def part_info(ctx: MklContext, kernel: SparseGemmKernel, product: SparseProduct) -> dict[str, Any]:
    call = MklSparseCall(
        operation="SPARSE_OPERATION_TRANSPOSE" if kernel.a_t else "SPARSE_OPERATION_NON_TRANSPOSE",
        layout="SPARSE_LAYOUT_ROW_MAJOR" if kernel.b_t else "SPARSE_LAYOUT_COLUMN_MAJOR",
        m=kernel.m,
        n=kernel.n,
        k=kernel.k,
        nnz=int(product.values.size),
        ldx=product.ldx,
        ldy=product.ldy,
        expected_calls=EXPECTED_CALLS,
    )
    info = MklPartInfo(call=product.routine, mode="inspector-executor", mkl=ctx.runtime, sparse_call=call)
    hint = "mkl_sparse_set_mv_hint" if product.vector else "mkl_sparse_set_mm_hint"
    return {
        **info.model_dump(),
        "format": "csr, zero-based, 32-bit MKL_INT indices",
        "descriptor": "SPARSE_MATRIX_TYPE_GENERAL",
        "inspector": f"{hint} ({product.hint_status}) and mkl_sparse_optimize, before timing",
        "alpha": 1,
        "beta": 0,
        "deepbench_departures": DEPARTURES,
    }
