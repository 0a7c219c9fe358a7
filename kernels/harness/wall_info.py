"""Where a kernel's wall time went (`info.wall_s`, execute.py): preparing it, each direction's first
call, timing and check, and what the backend does after (--layout both, --pad both).

Why: a suite's wall time is a target of its own (issue 43: `train` under 10 minutes with checks, while
cuDNN's engine search grew as wide as cudnnFind), and the time a result's samples hold is a small part
of it. With these seconds in every result, a run says where its minutes went without a profiler or a
second run: `tests/benchmarks/where_time_went.py` sums them per operation and precision. Older results
have none (the field is optional)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel, ConfigDict, Field

from ..backends.contract.declaration import PartInfo


class PartSeconds(BaseModel):
    """One direction's wall seconds."""

    model_config = ConfigDict(frozen=True)
    first_call: float = Field(0.0, description="the untimed first call (library handles, lazy loading)")
    timing: float = Field(0.0, description="the timer: calibration, warm-up, every sample")
    check: float = Field(0.0, description="the correctness check of the last timed call's output")


class WallSeconds(BaseModel):
    """One kernel's wall seconds, by what the harness was doing."""

    model_config = ConfigDict(frozen=True)
    prepare: float = Field(0.0, description="backend.prepare: inputs, library plans, an engine race where there is one")
    parts: dict[str, PartSeconds] = Field(default_factory=dict)
    after: float = Field(0.0, description="after the parts: --layout both's other layout, --pad both's twin")

    @property
    def total(self) -> float:
        return self.prepare + self.after + sum(p.first_call + p.timing + p.check for p in self.parts.values())


class WallInfo(PartInfo):
    """The kernel-level info key the harness writes (older results: None)."""

    wall_s: WallSeconds | None = None


# The phases, by their fields' names: the kernel's, and each direction's.
PREPARE, AFTER = "prepare", "after"
FIRST_CALL, TIMING, CHECK = "first_call", "timing", "check"


class Stopwatch:
    """Seconds of a kernel's phases and of its directions' (time.monotonic: immune to the wall clock's steps)."""

    def __init__(self) -> None:
        self._kernel: dict[str, float] = {}
        self._parts: dict[str, dict[str, float]] = {}  # direction -> its phases, in the order they ran

    @contextmanager
    def phase(self, name: str, direction: str | None = None) -> Iterator[None]:
        """Time the block as the kernel's phase `name`, or as `direction`'s."""
        into = self._kernel if direction is None else self._parts.setdefault(direction, {})
        start = time.monotonic()
        try:
            yield
        finally:
            into[name] = into.get(name, 0.0) + time.monotonic() - start

    def wall_seconds(self) -> WallSeconds:
        """The phases timed so far, as the result records them."""
        return WallSeconds(**self._kernel, parts={d: PartSeconds(**p) for d, p in self._parts.items()})
