"""The one sampling loop of every timer (CPU, CUDA, collectives): take a sample, show the stopping
criteria what they judge, stop at the first reason.

A timer brings a `SampleSource`: how to take one sample and what the criteria then see. The loop
knows nothing of clocks, ranks or devices, so the three timers stop by the same rules and the
loop is tested once, with fake sources (tests/test_sampling.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .stopping import Criteria, Progress, first_reason


@dataclass(frozen=True)
class Step:
    """What one sample shows the criteria: `judged` for the stopping rule (None: nothing it may
    judge yet, e.g. every sample so far was throttled), `overall` for the limits on every sample
    taken (None: no such limits)."""

    judged: Progress | None
    overall: Progress | None = None


class SampleSource(Protocol):
    """One timer's side of the loop."""

    def take(self) -> Step:
        """Take one sample, keep it, and say what the criteria see now."""

    def pause(self) -> None:
        """Between a sample that did not stop the loop and the next (e.g. a throttled GPU's rest)."""


def sample_until(source: SampleSource, rule: Criteria, limits: Criteria = ()) -> str:
    """Take samples from `source` until a criterion stops: first the rule on what it judges, then
    the limits on every sample taken. Returns the reason."""
    while True:
        step = source.take()
        reason = first_reason(rule, step.judged) if step.judged is not None else None
        if not reason and step.overall is not None:
            reason = first_reason(limits, step.overall)
        if reason:
            return reason
        source.pause()
