"""cuSPARSE called directly, through nvmath-python's bindings: DeepBench's sparse GEMMs.

DeepBench's `sparse_bench.cu` multiplied a CSR matrix A (m x k, at the kernel's sparsity) by a
dense column-major B (k x n) with cuSPARSE (csrmv for n = 1, csrmm otherwise) and timed
`cublasSgemm` of the same shape beside it, reporting the speedup. Those routines are gone from
cuSPARSE 12; their successors are the generic SpMV and SpMM, which this backend calls with the
same operands (spmm.py). The dense time comes from the cuBLAS backend's DeepBench call
(dense_beside.py)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ...catalog import Kernel, SparseGemmKernel
from ...precision import Precision
from ..base import Prepared
from ..dense_beside import DenseBeside
from ..native import NativeCudaBackend
from . import spmm


class CusparseBackend(NativeCudaBackend):
    name = "cusparse"
    binding = ("nvmath.bindings.cusparse", "nvmath-python")
    operations = ("sparse_gemm",)

    def covers(self, kernel: Kernel, precision: Precision) -> bool:
        return super().covers(kernel, precision) and precision in spmm.TYPES

    def prepare_op(self, kernel: Kernel, precision: Precision) -> Prepared:
        assert isinstance(kernel, SparseGemmKernel)
        prepared = spmm.prepare(self, kernel, precision)
        prepared.after = lambda backend, rule: self.dense_beside.measure(kernel, precision, rule)
        return prepared

    @cached_property
    def dense_beside(self) -> DenseBeside:
        return DenseBeside(self.settings, self.cuda)

    @property
    def handle(self) -> Any:
        if getattr(self, "_handle", None) is None:
            self._handle = spmm.Handle(self.lib)
        return self._handle
