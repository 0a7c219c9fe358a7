"""The small interface every backend (one per native library) implements.

Like an nccl-tests collective, each operation a backend supports provides: the sizes (from the
kernel), inputs and a reference, the call to time, and the derived metric (FLOPs and bytes, from
the kernel). A backend turns (kernel, precision) into `TimedPart`s, one per direction; the
harness warms up, measures each with the backend's timer and checks the outputs of the last
timed call, so every backend is measured and checked the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...catalog import Kernel
from ...layers import ElementwiseKernel
from ...precision import Precision
from ...results import Check, Measurement, Settings
from ...timing.stopping import StopRule


class Unsupported(Exception):
    """Raised by `prepare` when the backend cannot run a kernel in a precision; the message is
    the reason reported to the user, so it must say why (and what would run instead)."""


def elementwise_layout(kernel: ElementwiseKernel) -> tuple[tuple[int, int], tuple[int, ...], tuple[int, ...]]:
    """kernel.layout() for a backend: a broadcast pattern no backend lays out is unsupported."""
    try:
        return kernel.layout()
    except ValueError as exc:
        raise Unsupported(str(exc)) from None


@dataclass
class TimedPart:
    """One direction of a kernel, ready to time.

    `run` recomputes the outputs from the inputs every call (beta = 0: nothing accumulates);
    `check` compares the outputs the last `run` left behind with a reference."""

    direction: str
    run: Callable[[], object]
    check: Callable[[], Check]
    flops: float
    min_bytes: float
    info: dict[str, Any] = field(default_factory=dict)
    # Work that a CUDA graph cannot capture (host synchronisation, dynamic shapes) says so.
    capturable: bool = True
    # A part that must be timed its own way (a collective: every rank must make the same calls,
    # decided together) brings its timer; None: the backend's `measure`.
    timer: Callable[[Callable[[], object], StopRule], Measurement] | None = None
    # What the call writes (a tensor): the GPU tests spoil it to show that the check can fail.
    output: Any = None
    # The precision it runs in (a GPU timer rates it against that precision's peak): set by
    # `Prepared.in_precision`, so that a backend keeps no "current precision" between calls.
    precision: Precision = Precision.FP32


@dataclass
class Prepared:
    parts: list[TimedPart]
    padding: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    # Extra figures derived after timing (e.g. sparse GEMM's dense time), filled by the backend.
    after: Callable[[Backend, StopRule], dict[str, Any]] | None = None

    def in_precision(self, precision: Precision) -> Prepared:
        """These parts, each marked with the precision the kernel was prepared in."""
        for part in self.parts:
            part.precision = precision
        return self


class Backend(ABC):
    """One native library (PyTorch on a device, onnxruntime, TFLite, ...).

    What the harness asks of a backend beyond preparing and timing kernels is declared here, with
    the answer of a backend that runs as one process: `ranked`, `rank`, `item_barrier` and
    `broken`. A backend whose processes run as ranks of one job (an all-reduce library,
    kernels/backends/collectives/) overrides them; the harness reads them, never probes for them."""

    name: str = ""
    # One of several ranks of a communicator it set up itself: `rank` is then its rank in it,
    # which the harness trusts over the engine's variables (kernels/launch_rank.py).
    ranked: ClassVar[bool] = False
    rank: int = 0
    # Why its library cannot be used here ('' where it can): its kernels are then unsupported with it.
    missing: str = ""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @abstractmethod
    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        """Allocate inputs and outputs for the kernel; raise Unsupported with the reason."""

    def covers(self, kernel: Kernel, precision: Precision) -> bool:
        """Whether it runs the kernel in the precision (a router's choice, shared/router.py): by
        default every kernel, where its library loads."""
        return not self.missing

    def cpu_threads(self) -> int | None:
        """The CPU threads this backend computes with (None: all usable CPUs): the harness counts
        the CPUs they leave free when it judges contention (harness/execute.py)."""
        return self.settings.threads

    @abstractmethod
    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        """Time `fn` with this backend's timer until `rule` says stop."""

    def prepare_unpadded(self, kernel: Kernel, precision: Precision) -> Prepared | None:
        """The kernel at its listed shape, for `--pad both` (the alignment penalty), where this
        backend pads as DeepBench did (kernels/padding.py); None where it never pads."""
        return None

    def backend_for(self, kernel: Kernel, precision: Precision) -> str:
        """The name results record for this kernel: this backend's, or, for a backend that picks a
        library per operation (kernels/backends/nvidia/), the one it picks."""
        return self.name

    def library_versions(self) -> dict[str, str]:
        return {}

    def device_facts(self) -> dict[str, Any]:
        return {}

    def device_facts_after(self) -> dict[str, Any]:
        """Facts read again at the end of the run (clocks, temperature, throttling), merged into the
        device facts; a `warnings` list there is shown to the user (e.g. the board throttled)."""
        return {}

    def ceilings(self, precisions: Iterable[Precision] = ()) -> dict[str, float]:
        """Measured peaks (tflops_<precision>, gbps_copy) for the roofline; empty if not measured.
        `precisions`: the run's, where the backend measures only those (CPU GEMMs)."""
        return {}

    def release(self) -> None:  # noqa: B027 - an optional hook: doing nothing is the default
        """Free what the last kernel held before the next is prepared."""

    def close(self) -> None:  # noqa: B027 - an optional hook: most backends start no process of their own
        """End what the backend started for the run (a helper process), before the run's end-of-run
        facts are read: the machine then shows no process of the run but the harness."""

    def item_barrier(self) -> None:  # noqa: B027 - an optional hook: one process has no one to wait for
        """Wait until every rank is about to start the next kernel (a no-op with one process): the
        harness calls it after it told the host which kernel starts, so that whatever befalls one
        rank from then on is that kernel's."""

    @property
    def broken(self) -> str:
        """Why this process cannot run another kernel ('' while it can): a rank of a broken
        communicator; the harness then asks the host to start every rank again."""
        return ""
