"""What a GPU measurement strategy hands the sampling loop: a way to take samples (us per call),
how many calls each holds, and how to replay exactly what was timed for the profiler cross-check.
Free of torch, so the loop's decisions are tested without a GPU."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def no_probe() -> None:
    """Default for `during` and `before_replay`: nothing to do."""


@dataclass
class Sampler:
    """Turns one way of timing into samples (us per call) for the shared stopping loop.

    `replay` enqueues the work of one sample untimed (`replay_calls` calls of the timed
    function), so the profiler can record exactly what was timed."""

    method: str
    calls: int
    take: Callable[[], float]
    warmup_calls: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    replay: Callable[[], object] | None = None
    replay_calls: int = 0
    before_replay: Callable[[], object] = no_probe  # e.g. the cold measurement's L2 flush, not profiled
