"""The GPU timer's side of the shared sampling loop: samples judged with the clock reading taken
while each ran. Free of torch, so it is tested with fake samplers and clocks.

nvbench's throttle handling (settling.throttled decides): a throttled sample is not shown to the
stopping rule, and the GPU rests RECOVERY_S before the next sample, so a heat-capped stretch does
not decide the figure. At the clock's first move between boost and below (settling.SettleWatch)
the samples so far are left out and the rule starts over, its minimum time counted from there;
while a share of the readings since are power_limited (settling.stretch_limited), the rule's
longer minimum for a limited clock applies; while every reading since is calm (settling.calm), its
floor follows the samples' spread (stopping.spread_floor). The rule's hard limits (the sample cap,
twice the time cap) apply to every sample taken, so the loop ends whatever the clocks say (then the
result says throttled)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .sampler import Sampler
from .sampling import Step, sample_until
from .settling import ClockReading, SettleWatch, calm, power_limited, stretch_limited, throttled
from .stopping import Progress, StopRule

RECOVERY_S = 0.05  # rest after a throttled sample (nvbench's throttle_recovery_delay)


def select_unthrottled(
    samples: list[float], clocks: list[float | None], low: list[bool], min_keep: int
) -> tuple[list[float], list[float], int, int]:
    """(kept samples, their clocks, discarded, throttled-but-kept). The samples flagged `low`
    (settling.throttled) are dropped if at least `min_keep` remain."""
    n_low = sum(low)
    if n_low == 0 or len(samples) - n_low < min_keep:
        return samples, [c for c in clocks if c is not None], 0, n_low
    kept = [(s, c) for s, c, lo in zip(samples, clocks, low, strict=False) if not lo]
    return [s for s, _ in kept], [c for _, c in kept if c is not None], n_low, 0


@dataclass(frozen=True)
class Sampling:
    """What the stopping loop took: the steady stretch's samples with the clock reading and the
    throttle flag of each, why it stopped, and what was left out before the clock first moved."""

    samples: list[float]
    readings: list[ClockReading]
    low: list[bool]
    reason: str
    settle_samples: int = 0
    settle_s: float = 0.0
    calm: bool = False  # every reading of the stretch was calm: the floor followed the spread
    stretch_s: float = 0.0  # the seconds the rule judged: from the stretch's start to the last sample


class ClockedSamples:
    """A sampler's samples with a clock reading each; the rule judges the stretch since the clock
    first moved, less its throttled samples."""

    def __init__(
        self,
        take: Callable[[], float],
        clock: Callable[[], ClockReading],
        now: Callable[[], float],
        reference: Callable[[], float],
        rest: Callable[[float], None],
    ) -> None:
        self.take_sample, self.clock, self.now, self.reference, self.rest = take, clock, now, reference, rest
        self.samples: list[float] = []
        self.readings: list[ClockReading] = []
        self.low: list[bool] = []
        self.counted: list[float] = []  # the stretch's unthrottled samples: what the rule judges
        self.watch = SettleWatch()
        self.first = 0  # where the stretch begins
        self.limited = 0  # power-limited readings in the stretch
        self.restless = 0  # readings of the stretch that were not calm
        self.start = self.stretch = now()
        self.last = self.start

    def take(self) -> Step:
        self.samples.append(self.take_sample())
        reading = self.clock()
        ref = self.reference()
        self.readings.append(reading)
        self.low.append(throttled(reading, ref))
        if self.watch.observe(reading, ref):
            # The reading was taken while this sample ran: the stretch begins with the next one.
            self.first, self.counted, self.limited, self.restless = len(self.samples), [], 0, 0
            self.stretch = self.now()
        else:
            self.limited += power_limited(reading, ref)
            self.restless += not calm(reading, ref)
            if not self.low[-1]:
                self.counted.append(self.samples[-1])
        t = self.last = self.now()
        judged = None
        if self.counted:
            readings = len(self.samples) - self.first
            judged = Progress(self.counted, t - self.stretch, stretch_limited(self.limited, readings), self.calm)
        return Step(judged, Progress(self.samples, t - self.start))

    @property
    def calm(self) -> bool:
        """Every reading of the stretch so far was calm."""
        return len(self.samples) > self.first and self.restless == 0

    def pause(self) -> None:
        if self.low[-1]:
            self.rest(RECOVERY_S)


def run_samples(
    sampler: Sampler,
    rule: StopRule,
    clock: Callable[[], ClockReading],
    now: Callable[[], float] = time.perf_counter,
    reference: Callable[[], float] = lambda: 0.0,
    rest: Callable[[float], None] = time.sleep,
) -> Sampling:
    """Take samples until the rule (or its hard limits) stops; the steady stretch's samples."""
    source = ClockedSamples(sampler.take, clock, now, reference, rest)
    reason = sample_until(source, rule.criteria, rule.hard_limits)
    first = source.first
    if first >= len(source.samples):  # stopped right at the move: keep what there is
        first = 0
    return Sampling(
        source.samples[first:],
        source.readings[first:],
        source.low[first:],
        reason,
        first,
        source.stretch - source.start if first else 0.0,
        calm=source.calm,
        stretch_s=source.last - source.stretch,
    )
