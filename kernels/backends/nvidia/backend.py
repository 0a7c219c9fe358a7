"""The nvidia backend: each kernel on the backend its declaration names for the operation
(declaration.py), loaded through the registry, where that backend covers the kernel's precision;
on the fallback (PyTorch) otherwise, with the reason."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...catalog import Kernel
from ...precision import Precision
from ...results import Measurement, Settings
from ...timing.stopping import StopRule
from .. import load_backend
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from ..gpu.cuda.device import CudaDevice
from ..gpu.cuda.native import NativeCudaBackend
from .declaration import NVIDIA


class NvidiaBackend(Backend):
    name = "nvidia"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.cuda = CudaDevice(settings)
        self.torch = load_backend(NVIDIA.fallback, settings, cuda=self.cuda)
        self._natives: dict[str, NativeCudaBackend] = {}
        self._current: Backend = self.torch
        self._versions: dict[str, str] | None = None

    def native(self, name: str) -> NativeCudaBackend:
        """A native backend, loaded on first use and sharing this run's GPU."""
        if name not in self._natives:
            native = load_backend(name, self.settings, cuda=self.cuda)
            assert isinstance(native, NativeCudaBackend)
            self._natives[name] = native
        return self._natives[name]

    def _choose(self, kernel: Kernel, precision: Precision) -> tuple[Backend, str]:
        """The backend for this kernel, and why not the native one when it is PyTorch."""
        name = NVIDIA.serves.get(kernel.op)
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
            raise Unsupported(f"{exc}; not on {NVIDIA.serves[kernel.op]}: {why}" if why else str(exc)) from None
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

    def library_versions(self) -> dict[str, str]:
        """Every library's version, asked once per run (each result records them; asking the five
        libraries and the packages' metadata took 5 ms a kernel)."""
        if self._versions is None:
            self._versions = self.torch.library_versions()
            for name in sorted(set(NVIDIA.serves.values())):
                self._versions.update(self.native(name).library_versions())
        return dict(self._versions)

    def device_facts(self) -> dict[str, Any]:
        facts = self.cuda.facts()
        facts["backends"] = {
            op: (name if not self.native(name).missing else f"torch ({self.native(name).missing})")
            for op, name in NVIDIA.serves.items()
        }
        return facts

    def ceilings(self, precisions: Iterable[Precision] = ()) -> dict[str, float]:
        return self.cuda.ceilings()

    def release(self) -> None:
        self._current.release()
