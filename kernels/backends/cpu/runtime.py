"""The base of the backends over a CPU runtime library (onnxruntime, LiteRT, MKL, oneDNN): what they
share besides their calls. Threads (as asked, else the backend's default: one per usable CPU that others
leave free), the host clock's calibrated loops (kernels/timing/cpu.py) with the energy meter around them
under --energy, the board's facts and its throttling watch (board.py), and the dispatch of each operation
to its module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...catalog import Kernel
from ...noise import quiet_threads, usable_cpus
from ...precision import Precision
from ...results import Measurement, Settings
from ...timing import cpu as cpu_timer
from ...timing.energy import with_cpu_energy
from ...timing.stopping import StopRule
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from .board import BoardMonitor

CPU_DEVICES = ("cpu", "")  # Settings.device of a run on the host's processors
TOPOLOGY = "/sys/devices/system/cpu/cpu{}/topology/{}"


def physical_cores(cpus: tuple[int, ...] | None = None) -> int:
    """The physical cores among `cpus` (default: the usable CPUs): hyperthreads of one core counted once,
    by their package and core ids (sysfs); where the topology cannot be read, every CPU counts."""
    cpus = cpus if cpus is not None else usable_cpus()
    cores = set()
    for cpu in cpus:
        try:
            ids = tuple(
                Path(TOPOLOGY.format(cpu, name)).read_text().strip() for name in ("physical_package_id", "core_id")
            )
        except OSError:
            ids = ("cpu", str(cpu))
        cores.add(ids)
    return max(1, len(cores))


class CpuRuntimeBackend(Backend):
    """A backend whose library computes on the host's CPUs. Subclasses give `operations` (operation ->
    its module's prepare, called with the backend's `context`), make the context in __init__, and say
    what they record of their library (`library_versions`, `runtime_facts`)."""

    operations: ClassVar[Mapping[str, Callable[[Any, Any, Precision], Prepared]]] = {}
    context: Any = None

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        if settings.device not in CPU_DEVICES:
            raise RuntimeError(f"the {self.name} backend runs on the CPU; device '{settings.device}' is not supported")
        self.threads = settings.threads or self.default_threads()
        self.board = BoardMonitor()

    def default_threads(self) -> int:
        """Settings.threads unset: one thread per usable CPU less those other processes keep busy
        (noise.quiet_threads; recorded in the facts, not guessed)."""
        return quiet_threads()

    def cpu_threads(self) -> int | None:
        return self.threads

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if kernel.op not in self.operations:
            raise Unsupported(
                f"the {self.name} backend does not run {kernel.op} (it runs: {', '.join(self.operations)})"
            )
        return self.operations[kernel.op](self.context, kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        measured = cpu_timer.measure(fn, rule, self.settings.min_sample_s)
        if self.settings.energy:
            measured = with_cpu_energy(measured, fn, part.info, self.settings.energy_window_s)
        self.board.mark(part.info)
        return measured

    def runtime_facts(self) -> dict[str, Any]:
        """What the library says of itself in the device facts (its runtime, delegates, providers)."""
        return {}

    def device_facts(self) -> dict[str, Any]:
        return {**self.board.facts, "threads": self.threads, **self.runtime_facts()}

    def device_facts_after(self) -> dict[str, Any]:
        return self.board.after()
