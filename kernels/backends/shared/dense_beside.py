"""The dense GEMM of a sparse kernel's shape, timed beside it: DeepBench's sparse comparison.

DeepBench's `sparse_bench.cu` timed `cublasSgemm` of the same (m, n, k) after each sparse product
and reported the speedup; a sparse backend does the same through the backend its declaration names
(`dense_backend`: cuBLAS's `cublasGemmEx` for cuSPARSE and cuSPARSELt), with that backend's padding,
sharing what the sparse backend shares with it (the run's GPU), loaded through the registry as a run
loads it. The harness turns `dense_time_us` into `speedup_vs_dense`."""

from __future__ import annotations

from typing import Any

from ...catalog import GemmKernel, Sparse24GemmKernel, SparseGemmKernel
from ...precision import Precision
from ...results import Settings
from ...timing.stopping import StopRule
from .. import declaration_of, load_backend
from ..contract.base import Backend, Unsupported

# The kernels with a GEMM's shape and a dense twin.
SparseKernel = SparseGemmKernel | Sparse24GemmKernel


class DenseBeside:
    """The dense backend a sparse one declares, made on first use with what the sparse backend shares
    with it (`shared`: the run's GPU, `cuda=`), and the dense timing."""

    def __init__(self, sparse: str, settings: Settings, **shared: Any) -> None:
        self.name = declaration_of(sparse).dense_backend
        if not self.name:
            raise ValueError(f"the {sparse} backend declares no dense backend to time beside it")
        self.settings, self.shared = settings, shared
        self._dense: Backend | None = None

    @property
    def backend(self) -> Backend:
        """Loaded by name through the registry (a shared module imports no backend)."""
        if self._dense is None:
            self._dense = load_backend(self.name, self.settings, **self.shared)
        return self._dense

    def measure(
        self, kernel: SparseKernel, precision: Precision, rule: StopRule, layout: tuple[bool, bool] | None = None
    ) -> dict[str, Any]:
        """The dense GEMM's time, rate, check and call; where the dense backend has no such GEMM, why (the
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
