"""The sparse product DeepBench timed: CSR A (m x k) times dense column-major B (k x n).

`cusparseSpMV` for n = 1 (DeepBench: csrmv) and `cusparseSpMM` otherwise (DeepBench: csrmm),
with 32-bit CSR indices as DeepBench's, alpha = 1, beta = 0, cuSPARSE's default algorithm, and
the external buffer the library asks for, allocated once. A's zeros follow DeepBench's rule
(each entry zero with probability `sparsity`), its other entries random normal; the check
compares C with the float64 product of the same A and B (kernels/reference/torch_checks.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...catalog import SparseGemmKernel
from ...precision import Precision
from ...reference.torch_checks import check_matmul
from ..contract.base import Prepared, TimedPart
from ..gpu.cuda.native import StreamHandle
from .declaration import TYPES

if TYPE_CHECKING:
    from .backend import CusparseBackend


class Handle(StreamHandle):
    """A cuSPARSE handle on torch's current stream."""

    def __init__(self, cusparse: Any) -> None:
        super().__init__(cusparse.create())
        self.cusparse = cusparse

    def on_stream(self, stream: int) -> None:
        self.cusparse.set_stream(self.handle, stream)


class SparseProduct:
    """C = A B through cuSPARSE's generic API; owns its descriptors and the tensors they point to."""

    def __init__(
        self,
        cs: Any,
        handle: Handle,
        a: torch.Tensor,
        b_store: torch.Tensor,
        c_store: torch.Tensor,
        precision: Precision,
    ) -> None:
        import nvmath

        self.cs, self.handle = cs, handle
        value_type, compute = (int(getattr(nvmath.CudaDataType, name)) for name in TYPES[precision])
        self.compute = compute
        m, k = a.shape
        n = b_store.shape[0]
        csr = a.to_sparse_csr()
        self.rows, self.cols = csr.crow_indices().to(torch.int32), csr.col_indices().to(torch.int32)
        self.values = csr.values().contiguous()
        self.b_store, self.c_store = b_store, c_store
        self.alpha, self.beta = np.ones(1, dtype=np.float32), np.zeros(1, dtype=np.float32)
        i32, base, op_n = int(cs.IndexType.INDEX_32I), int(cs.IndexBase.ZERO), int(cs.Operation.NON_TRANSPOSE)
        self.op_n = op_n
        self.mat_a = cs.create_csr(
            m,
            k,
            self.values.numel(),
            self.rows.data_ptr(),
            self.cols.data_ptr(),
            self.values.data_ptr(),
            i32,
            i32,
            base,
            value_type,
        )
        self.vector = n == 1
        if self.vector:
            self.alg = int(cs.SpMVAlg.DEFAULT)
            self.b = cs.create_dn_vec(k, b_store.data_ptr(), value_type)
            self.c = cs.create_dn_vec(m, c_store.data_ptr(), value_type)
            size = cs.sp_mv_buffer_size(
                handle.bind(),
                op_n,
                self.alpha.ctypes.data,
                self.mat_a,
                self.b,
                self.beta.ctypes.data,
                self.c,
                compute,
                self.alg,
            )
        else:
            self.alg = int(cs.SpMMAlg.DEFAULT)
            col = int(cs.Order.COL)
            self.b = cs.create_dn_mat(k, n, k, b_store.data_ptr(), value_type, col)
            self.c = cs.create_dn_mat(m, n, m, c_store.data_ptr(), value_type, col)
            size = cs.sp_mm_buffer_size(
                handle.bind(),
                op_n,
                op_n,
                self.alpha.ctypes.data,
                self.mat_a,
                self.b,
                self.beta.ctypes.data,
                self.c,
                compute,
                self.alg,
            )
        self.buffer = torch.empty(max(int(size), 1), dtype=torch.uint8, device=a.device)
        self.nnz = int(self.values.numel())

    @property
    def call(self) -> str:
        return "cusparseSpMV (DeepBench: cusparseScsrmv)" if self.vector else "cusparseSpMM (DeepBench: cusparseScsrmm)"

    def __call__(self) -> None:
        cs, a, b = self.cs, self.alpha.ctypes.data, self.beta.ctypes.data
        if self.vector:
            cs.sp_mv(
                self.handle.bind(),
                self.op_n,
                a,
                self.mat_a,
                self.b,
                b,
                self.c,
                self.compute,
                self.alg,
                self.buffer.data_ptr(),
            )
        else:
            cs.sp_mm(
                self.handle.bind(),
                self.op_n,
                self.op_n,
                a,
                self.mat_a,
                self.b,
                b,
                self.c,
                self.compute,
                self.alg,
                self.buffer.data_ptr(),
            )

    def __del__(self) -> None:
        try:
            self.cs.destroy_sp_mat(self.mat_a)
            destroy = self.cs.destroy_dn_vec if self.vector else self.cs.destroy_dn_mat
            destroy(self.b)
            destroy(self.c)
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone first
            pass


def prepare(backend: CusparseBackend, kernel: SparseGemmKernel, precision: Precision) -> Prepared:
    ctx = backend.ctx
    dtype = ctx.dtype(precision)
    m, n, k = kernel.m, kernel.n, kernel.k
    keep = torch.rand((m, k), device=ctx.device, generator=ctx.generator) >= kernel.sparsity
    a = ctx.random((m, k), dtype) * keep.to(dtype)  # row-major m x k: A, for the CSR and the check
    b_store = ctx.random((n, k), dtype)  # column-major k x n (ldb = k)
    c_store = torch.empty((n, m), dtype=dtype, device=ctx.device)  # column-major m x n (ldc = m)
    product = SparseProduct(backend.lib, backend.handle, a, b_store, c_store, precision)
    # c_store holds C^T row-major: C^T = B^T A^T, with b_store = B^T.
    part = TimedPart(
        "fwd",
        product,
        lambda: check_matmul(c_store, b_store, a.t(), precision, ctx.generator),
        kernel.flops(),
        kernel.min_bytes("fwd", precision),
        info={
            "library": "cuSPARSE",
            "call": product.call,
            "format": "csr",
            "index": "int32",
            "nnz": product.nnz,
            "algorithm": "CUSPARSE_SPMM_ALG_DEFAULT / CUSPARSE_SPMV_ALG_DEFAULT",
            "buffer_bytes": int(product.buffer.numel()),
            "alpha": 1,
            "beta": 0,
        },
        output=c_store,
    )
    return Prepared(parts=[part])
