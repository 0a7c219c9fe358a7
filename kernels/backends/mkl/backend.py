"""The mkl backend's class: MKL loaded once (binding.py), its threads set to the run's (default: one per physical
core, as DeepBench's Intel scripts ran one OpenMP thread per core), each operation's module (OPERATIONS), and
the sparse GEMM's dense twin (MKL's own cblas_sgemm, through the shared DenseBeside). Where MKL is missing,
the backend still loads and every kernel is unsupported with what to install."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

import numpy as np

from ...catalog import Kernel, SparseGemmKernel
from ...noise import quiet_threads
from ...padding import PadMode
from ...precision import Precision
from ...results import Settings
from ..contract.base import Prepared, Unsupported
from ..cpu.runtime import CpuRuntimeBackend, physical_cores
from ..shared.dense_beside import DenseBeside
from . import binding, gemm, sparse_gemm
from .context import MklContext
from .cpu_isa import this_cpu
from .declaration import INSTALL_HINT, MKL, MklRuntimeInfo
from .operands import Draw

OPERATIONS: dict[str, Callable[[MklContext, Any, Precision], Prepared]] = {
    "gemm": gemm.prepare,
    "sparse_gemm": sparse_gemm.prepare,
}
WHEELS = ("mkl", "intel-openmp", "tbb")  # the packages that carry MKL's libraries and its threading runtimes
# The variables that change how MKL or its OpenMP runtime runs: recorded where set.
RUNTIME_ENV = ("MKL_THREADING_LAYER", "MKL_NUM_THREADS", "MKL_DYNAMIC", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")
OPENMP_ENV = ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY", "KMP_BLOCKTIME", "KMP_HW_SUBSET")


class MklBackend(CpuRuntimeBackend):
    name = "mkl"
    operations: ClassVar[Mapping[str, Callable[[Any, Any, Precision], Prepared]]] = OPERATIONS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.mkl: binding.Mkl | None = None
        try:
            self.mkl = binding.load()
        except binding.MklMissing as exc:
            self.missing = f"{exc}; {INSTALL_HINT}"
            return
        self.mkl.set_threads(self.threads)
        rng = np.random.default_rng(settings.seed)  # the operands and the checks' random vectors, as onnxruntime's
        self.context = MklContext(
            mkl=self.mkl,
            options=MKL.options_of(settings),
            pad=PadMode(settings.pad),
            rng=rng,
            draw=Draw(rng, settings.inputs),
            cpu=this_cpu(),
            runtime=self._runtime_info(),
        )

    def default_threads(self) -> int:
        """One thread per physical core (hyperthreads leave MKL's kernels no faster), as DeepBench's Intel
        scripts set OMP_NUM_THREADS to the cores; less the cores other processes keep busy."""
        return quiet_threads(cores=physical_cores())

    def _runtime_info(self) -> MklRuntimeInfo:
        assert self.mkl is not None
        runtime, cpu = self.mkl.runtime(), this_cpu()
        return MklRuntimeInfo(
            version=runtime.version,
            threading_layer=runtime.threading_layer,
            threads=runtime.threads,
            dynamic=runtime.dynamic,
            isa=runtime.isa,
            cpu_vendor=cpu.vendor,
            cpu_model=cpu.model,
        )

    def covers(self, kernel: Kernel, precision: Precision) -> bool:
        return self.mkl is not None and kernel.op in self.operations

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if self.mkl is None:
            raise Unsupported(f"the {self.name} backend cannot run here: {self.missing}")
        prepared = super().prepare(kernel, precision)
        if isinstance(kernel, SparseGemmKernel):
            prepared.after = lambda backend, rule: self.dense_beside.measure(kernel, precision, rule)
        return prepared.in_precision(precision)

    @cached_property
    def dense_beside(self) -> DenseBeside:
        return DenseBeside(self.name, self.settings)

    def library_versions(self) -> dict[str, str]:
        return dict(self._versions) if self.mkl is not None else {}

    @cached_property
    def _versions(self) -> dict[str, str]:
        """MKL's release and the wheels that carry it and its threading runtimes (read once: every result
        records them)."""
        assert self.mkl is not None
        versions = {"mkl": self.mkl.release_number(), "numpy": np.__version__}
        for wheel in WHEELS:
            try:
                versions[f"{wheel} (wheel)"] = version(wheel)
            except PackageNotFoundError:
                pass
        return versions

    def runtime_facts(self) -> dict[str, Any]:
        if self.mkl is None:
            return {"mkl": self.missing}
        runtime = self.mkl.runtime()
        environment = {name: os.environ[name] for name in (*RUNTIME_ENV, *OPENMP_ENV) if name in os.environ}
        return {
            "mkl_version": runtime.version,
            "mkl_library": runtime.library,
            "mkl_threading_layer": runtime.threading_layer,
            "mkl_threads": runtime.threads,
            "mkl_dynamic": runtime.dynamic,
            "mkl_isa": runtime.isa,
            "cpu_vendor": this_cpu().vendor,
            "environment": environment,
        }
