"""cuSPARSE called directly, through nvmath-python's bindings: DeepBench's sparse GEMMs.

DeepBench's `sparse_bench.cu` multiplied a CSR matrix A (m x k, at the kernel's sparsity) by a
dense column-major B (k x n) with cuSPARSE (csrmv for n = 1, csrmm otherwise) and timed
`cublasSgemm` of the same shape beside it, reporting the speedup. Those routines are gone from
cuSPARSE 12; their successors are the generic SpMV and SpMM, which this backend calls with the
same operands (spmm.py). The dense time comes from the cuBLAS backend's DeepBench call."""

from __future__ import annotations

from typing import Any

from ...catalog import GemmKernel, Kernel, SparseGemmKernel
from ...precision import Precision
from ...timing.stopping import StopRule
from ..base import Backend, Prepared
from ..cublas import CublasBackend
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
        prepared.after = lambda backend, rule: self._dense_beside(kernel, precision, rule)
        return prepared

    def _dense_beside(self, kernel: SparseGemmKernel, precision: Precision, rule: StopRule) -> dict[str, Any]:
        """DeepBench's comparison: the dense GEMM of the same shape, through cublasGemmEx."""
        dense_kernel = GemmKernel(set=kernel.set, index=kernel.index, m=kernel.m, n=kernel.n, k=kernel.k,
                                  a_t=kernel.a_t, b_t=kernel.b_t)
        dense = self.dense_backend()
        part = dense.prepare(dense_kernel, precision).parts[0]
        part.run()
        m = dense.measure(part.run, rule, part)
        return {"dense_time_us": m.stats.model_dump(), "dense_tflops": dense_kernel.flops() / m.stats.median / 1e6,
                "dense_check": part.check().model_dump(), "dense_call": part.info.get("blas_call", {})}

    def dense_backend(self) -> Backend:
        if getattr(self, "_dense", None) is None:
            self._dense = CublasBackend(self.settings, self.cuda)
        return self._dense

    def default_precisions(self, kernel: Kernel) -> list[Precision]:
        return [Precision.FP32]

    @property
    def handle(self) -> Any:
        if getattr(self, "_handle", None) is None:
            self._handle = spmm.Handle(self.lib)
        return self._handle
