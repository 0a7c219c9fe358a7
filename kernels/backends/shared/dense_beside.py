"""The dense GEMM of a sparse kernel's shape, timed beside it: DeepBench's sparse comparison.

DeepBench's `sparse_bench.cu` timed `cublasSgemm` of the same (m, n, k) after each sparse product
and reported the speedup; the cuSPARSE backend (unstructured sparsity) and the cuSPARSELt backend
(2:4 structured sparsity) both do the same through the cuBLAS backend's `cublasGemmEx`, with its
padding, on the run's GPU (loaded through the registry, as a run loads it). The harness turns
`dense_time_us` into `speedup_vs_dense`."""

from __future__ import annotations

from typing import Any

from ...catalog import GemmKernel, Sparse24GemmKernel, SparseGemmKernel
from ...precision import Precision
from ...results import Settings
from ...timing.stopping import StopRule
from .. import load_backend
from ..contract.base import Backend, Unsupported
from ..gpu.cuda.device import CudaDevice

# The backend that times the dense twin, loaded by name (a shared module imports no backend).
DENSE_BACKEND = "cublas"
# The kernels with a GEMM's shape and a dense twin.
SparseKernel = SparseGemmKernel | Sparse24GemmKernel


class DenseBeside:
    """The cuBLAS backend, made on first use on the sparse backend's GPU, and the dense timing."""

    def __init__(self, settings: Settings, cuda: CudaDevice | None) -> None:
        self.settings, self.cuda = settings, cuda
        self._dense: Backend | None = None

    @property
    def backend(self) -> Backend:
        if self._dense is None:
            self._dense = load_backend(DENSE_BACKEND, self.settings, cuda=self.cuda)
        return self._dense

    def measure(
        self, kernel: SparseKernel, precision: Precision, rule: StopRule, layout: tuple[bool, bool] | None = None
    ) -> dict[str, Any]:
        """The dense GEMM's time, rate, check and call; where cuBLAS has no such GEMM, why (the
        sparse result stands without a speedup). `layout` (a_t, b_t): the operands' layout where
        the sparse product runs another than the kernel's, so that both sides run the same one."""
        a_t, b_t = layout if layout is not None else (kernel.a_t, kernel.b_t)
        dense_kernel = GemmKernel(
            set=kernel.set, index=kernel.index, m=kernel.m, n=kernel.n, k=kernel.k, a_t=a_t, b_t=b_t
        )
        dense = self.backend
        try:
            part = dense.prepare(dense_kernel, precision).parts[0]
        except Unsupported as exc:
            return {"dense_unsupported": str(exc)}
        part.run()
        m = dense.measure(part.run, rule, part)
        return {
            "dense_time_us": m.stats.model_dump(),
            "dense_tflops": dense_kernel.flops() / m.stats.median / 1e6,
            "dense_check": part.check().model_dump(),
            "dense_call": part.info.get("blas_call", {}),
        }
