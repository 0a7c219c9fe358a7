"""The NVIDIA platform's backend: for each kernel, NVIDIA's own library where a native backend
covers the operation and precision, PyTorch otherwise.

GEMM goes to cuBLAS (cublas/), convolution to cuDNN's graph API (cudnn/), sparse GEMM to
cuSPARSE (cusparse/), 2:4 structured sparse GEMM to cuSPARSELt (cusparselt/); recurrent layers,
layers, whole models and all-reduce stay on PyTorch (which calls cuDNN's RNN, cuBLAS and NCCL
itself). Every result names the backend that made it (`backend`) and the exact call
(`blas_call`, the cuDNN engine). Where a native binding is not installed the kernel runs on
PyTorch and its result says why (`native_unavailable`), so a machine without nvmath-python still
measures, and says it measured another way. `--backend` forces one library for every kernel
instead (e.g. `--backend torch` as a cross-check)"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..catalog import Kernel
from ..precision import Precision
from ..results import Measurement, Settings
from ..timing.stopping import StopRule
from .base import Backend, Prepared, TimedPart, Unsupported
from .cuda_device import CudaDevice
from .native import NativeCudaBackend
from .pytorch import TorchBackend

# operation -> the backend (kernels/backends/__init__.py BACKENDS) that calls its native library;
# __init__.py DELEGATES names them for the checker (which must not import this module's torch).
NATIVE_FOR_OPERATION = {"gemm": "cublas", "conv": "cudnn", "sparse_gemm": "cusparse", "sparse24_gemm": "cusparselt"}


class NvidiaBackend(Backend):
    name = "nvidia"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.cuda = CudaDevice(settings)
        self.torch = TorchBackend(settings, self.cuda)
        self._natives: dict[str, NativeCudaBackend] = {}
        self._current: Backend = self.torch
        self._versions: dict[str, str] | None = None

    def native(self, name: str) -> NativeCudaBackend:
        """A native backend, loaded on first use and sharing this run's GPU."""
        if name not in self._natives:
            from . import load_backend

            native = load_backend(name, self.settings, cuda=self.cuda)
            assert isinstance(native, NativeCudaBackend)
            self._natives[name] = native
        return self._natives[name]

    def _choose(self, kernel: Kernel, precision: Precision) -> tuple[Backend, str]:
        """The backend for this kernel, and why not the native one when it is PyTorch."""
        name = NATIVE_FOR_OPERATION.get(kernel.op)
        if name is None:
            return self.torch, ""
        native = self.native(name)
        if native.covers(kernel, precision):
            return native, ""
        return self.torch, native.missing or f"{name} does not run {kernel.op} in {precision.value}"

    def backend_for(self, kernel: Kernel, precision: Precision) -> str:
        return self._choose(kernel, precision)[0].name

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        self._current, why = self._choose(kernel, precision)
        try:
            prepared = self._current.prepare(kernel, precision)
        except Unsupported as exc:  # PyTorch cannot either: say why the native library did not run it
            raise Unsupported(f"{exc}; not on {NATIVE_FOR_OPERATION[kernel.op]}: {why}" if why else str(exc)) from None
        if why:
            prepared.info["native_unavailable"] = why
        return prepared

    def close(self) -> None:
        for native in self._natives.values():
            native.close()
        self.cuda.close()

    def device_facts_after(self) -> dict[str, Any]:
        return self.cuda.facts_after()

    def prepare_unpadded(self, kernel: Kernel, precision: Precision) -> Prepared | None:
        return self._current.prepare_unpadded(kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        return self._current.measure(fn, rule, part)

    def default_precisions(self, kernel: Kernel) -> list[Precision]:
        return self.torch.default_precisions(kernel)

    def library_versions(self) -> dict[str, str]:
        """Every library's version, asked once per run (each result records them; asking the five
        libraries and the packages' metadata took 5 ms a kernel)."""
        if self._versions is None:
            self._versions = self.torch.library_versions()
            for name in sorted(set(NATIVE_FOR_OPERATION.values())):
                self._versions.update(self.native(name).library_versions())
        return dict(self._versions)

    def device_facts(self) -> dict[str, Any]:
        facts = self.cuda.facts()
        facts["backends"] = {
            op: (name if not self.native(name).missing else f"torch ({self.native(name).missing})")
            for op, name in NATIVE_FOR_OPERATION.items()
        }
        return facts

    def ceilings(self, precisions: Iterable[Precision] = ()) -> dict[str, float]:
        return self.cuda.ceilings()

    def release(self) -> None:
        self._current.release()
