"""A backend that runs each operation on the backend its declaration names for it (`serves`), and every
other operation, and each kernel that backend does not cover, on its `fallback`: a platform's own
libraries called directly where a backend of them covers the kernel, a general framework elsewhere.

The routed backends are loaded through the registry on first use and share what the router makes for
them (`shared()`: the run's GPU for NVIDIA's), so that the warm-up, the clock reader and the measured
ceilings are the run's once. The device's facts and ceilings are the fallback's, which shares the same.
Every result names the backend that made it (`backend_for`); a kernel that ran on the fallback because
the routed backend's library is missing or does not cover it says why (`native_unavailable`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from ...catalog import Kernel
from ...precision import Precision
from ...results import Measurement, Settings
from ...timing.stopping import StopRule
from .. import load_backend
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from ..contract.declaration import BackendDeclaration


class RouterBackend(Backend):
    """Subclasses name their declaration and make what the routed backends share."""

    declaration: ClassVar[BackendDeclaration[Any]]

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.shares = self.shared()
        self.fallback = load_backend(self.declaration.fallback, settings, **self.shares)
        self._routed: dict[str, Backend] = {}
        self._current: Backend = self.fallback
        self._versions: dict[str, str] | None = None

    def shared(self) -> dict[str, Any]:
        """What every routed backend is handed (keyword arguments of its constructor)."""
        return {}

    def routed(self, name: str) -> Backend:
        """A routed backend, loaded on first use with what the router shares."""
        if name not in self._routed:
            self._routed[name] = load_backend(name, self.settings, **self.shares)
        return self._routed[name]

    def _choose(self, kernel: Kernel, precision: Precision) -> tuple[Backend, str]:
        """The backend for this kernel, and why not the routed one when it is the fallback."""
        name = self.declaration.serves.get(kernel.op)
        if name is None:
            return self.fallback, ""
        routed = self.routed(name)
        if routed.covers(kernel, precision):
            return routed, ""
        return self.fallback, routed.missing or f"{name} does not run {kernel.op} in {precision.value}"

    def backend_for(self, kernel: Kernel, precision: Precision) -> str:
        return self._choose(kernel, precision)[0].name

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        self._current, why = self._choose(kernel, precision)
        try:
            prepared = self._current.prepare(kernel, precision)
        except Unsupported as exc:  # the fallback cannot either: say why the routed library did not run it
            raise Unsupported(
                f"{exc}; not on {self.declaration.serves[kernel.op]}: {why}" if why else str(exc)
            ) from None
        if why:
            prepared.info["native_unavailable"] = why
        return prepared

    def prepare_unpadded(self, kernel: Kernel, precision: Precision) -> Prepared | None:
        return self._current.prepare_unpadded(kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        return self._current.measure(fn, rule, part)

    def cpu_threads(self) -> int | None:
        return self._current.cpu_threads()

    def library_versions(self) -> dict[str, str]:
        """Every library's version, asked once per run (each result records them; asking five
        libraries and the packages' metadata took 5 ms a kernel)."""
        if self._versions is None:
            self._versions = self.fallback.library_versions()
            for name in sorted(set(self.declaration.serves.values())):
                self._versions.update(self.routed(name).library_versions())
        return dict(self._versions)

    def device_facts(self) -> dict[str, Any]:
        facts = self.fallback.device_facts()
        facts["backends"] = {
            op: name if not self.routed(name).missing else f"{self.fallback.name} ({self.routed(name).missing})"
            for op, name in self.declaration.serves.items()
        }
        return facts

    def device_facts_after(self) -> dict[str, Any]:
        """The fallback's end-of-run facts, and those of each backend this run routed to (a warnings list
        joined, so that every one is shown)."""
        facts = self.fallback.device_facts_after()
        for routed in self._routed.values():
            extra = routed.device_facts_after()
            warnings = facts.get("warnings", []) + extra.pop("warnings", [])
            facts.update(extra)
            if warnings:
                facts["warnings"] = warnings
        return facts

    def ceilings(self, precisions: Iterable[Precision] = ()) -> dict[str, float]:
        return self.fallback.ceilings(precisions)

    def release(self) -> None:
        self._current.release()

    def close(self) -> None:
        for routed in self._routed.values():
            routed.close()
        self.fallback.close()
