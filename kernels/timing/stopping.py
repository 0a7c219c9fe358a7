"""When to stop taking samples, as small criteria composed into one rule (nvbench's stopping
criteria).

A criterion is a reason and the conditions that must all hold for it: `Stop(CONVERGED,
MinSamples(5), MinTime(0.2), NoiseBelow(0.01))`. A rule is an ordered tuple of criteria; the first
whose conditions hold gives the reason to stop. StopRule builds the harness's rule from its
settings:

- max-samples: the sample cap is reached;
- converged: enough samples, the minimum measuring time passed, and the noise is below the target;
- time-cap: enough samples and the time cap passed, or at least one sample and twice the cap (a
  very slow kernel never reaches the minimum of samples).

The noise is the half-width of the ~95% confidence interval of the median, taken from the
box-plot notch (McGill, Tukey and Larsen 1978): 1.57 * IQR / sqrt(n), over the median. It shrinks
as samples accumulate, so a noisy kernel still converges given time, and the time cap bounds what
it may take (the result is then flagged `unconverged`).

The minimum measuring time (nvbench's --min-time) keeps a figure from converging on its first few
milliseconds: a heavy GPU kernel's first samples run before the power limiter has settled, and a
median over a longer stretch is what a second run reproduces. While the limiter swings the clock
the stretch has to be longer still (`limited_min_time_s`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

NOTCH_FACTOR = 1.57  # 95% CI of the median from the IQR (McGill et al. 1978)

CONVERGED = "converged"
TIME_CAP = "time-cap"
MAX_SAMPLES = "max-samples"
REPEAT_COUNT = "repeat-count"
HARD_CAP_FACTOR = 2  # past this many time caps a measurement stops whatever else holds


def relative_precision(samples: Sequence[float]) -> float:
    """Half-width of the median's 95% CI over the median (inf with fewer than 2 samples)."""
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    return NOTCH_FACTOR * (q3 - q1) / math.sqrt(len(samples)) / med


@dataclass(frozen=True)
class Progress:
    """What the criteria judge: the samples so far, the seconds they took, and whether the power
    limiter holds the clock (settling.stretch_limited)."""

    samples: Sequence[float]
    elapsed_s: float
    limited: bool = False


class Condition(Protocol):
    """One test on the progress so far."""

    def met(self, progress: Progress) -> bool: ...


@dataclass(frozen=True)
class MinSamples:
    """At least `count` samples."""

    count: int

    def met(self, progress: Progress) -> bool:
        return len(progress.samples) >= self.count


@dataclass(frozen=True)
class MinTime:
    """At least `seconds` elapsed; while the clock is limited, at least `limited_seconds` where
    that is longer."""

    seconds: float
    limited_seconds: float = 0.0

    def met(self, progress: Progress) -> bool:
        needed = max(self.seconds, self.limited_seconds) if progress.limited else self.seconds
        return progress.elapsed_s >= needed


@dataclass(frozen=True)
class NoiseBelow:
    """The median's relative precision (relative_precision) is at most `target`."""

    target: float

    def met(self, progress: Progress) -> bool:
        return relative_precision(progress.samples) <= self.target


@dataclass(frozen=True)
class CallBudget:
    """The next sample of `calls_per_sample` calls would take the calls timed past `max_calls`
    (DeepBench's repeat count for a collective's size)."""

    max_calls: int
    calls_per_sample: int

    def met(self, progress: Progress) -> bool:
        return (len(progress.samples) + 1) * self.calls_per_sample > self.max_calls


@dataclass(frozen=True)
class Stop:
    """A reason to stop, given when all its conditions hold (tested in order, the cheap ones first:
    the noise is computed only once the others hold)."""

    reason: str
    conditions: tuple[Condition, ...]

    def __init__(self, reason: str, *conditions: Condition) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "conditions", conditions)

    def check(self, progress: Progress) -> str | None:
        return self.reason if all(c.met(progress) for c in self.conditions) else None


Criteria = Sequence[Stop]


def first_reason(criteria: Criteria, progress: Progress) -> str | None:
    """The reason of the first criterion that holds, or None to take another sample."""
    for criterion in criteria:
        reason = criterion.check(progress)
        if reason:
            return reason
    return None


@dataclass(frozen=True)
class StopRule:
    """The harness's stopping rule, from the run's settings."""

    target_rel_precision: float
    min_samples: int
    max_samples: int
    time_cap_s: float
    min_time_s: float = 0.0
    limited_min_time_s: float = 0.0

    @cached_property
    def criteria(self) -> tuple[Stop, ...]:
        """The rule as criteria, in the order they are tested."""
        enough = MinSamples(self.min_samples)
        return (
            Stop(MAX_SAMPLES, MinSamples(self.max_samples)),
            Stop(
                CONVERGED,
                enough,
                MinTime(self.min_time_s, self.limited_min_time_s),
                NoiseBelow(self.target_rel_precision),
            ),
            Stop(TIME_CAP, enough, MinTime(self.time_cap_s)),
            Stop(TIME_CAP, MinSamples(1), MinTime(HARD_CAP_FACTOR * self.time_cap_s)),
        )

    @cached_property
    def hard_limits(self) -> tuple[Stop, ...]:
        """Limits on every sample taken, also those the rule is not shown (a throttled or settling
        GPU's): the sample cap, and twice the time cap."""
        return (
            Stop(MAX_SAMPLES, MinSamples(self.max_samples)),
            Stop(TIME_CAP, MinTime(HARD_CAP_FACTOR * self.time_cap_s)),
        )

    def decide(self, samples: Sequence[float], elapsed_s: float, limited: bool = False) -> str | None:
        """The reason to stop now, or None to take another sample. `limited`: the power limiter
        holds the clock (settling.power_limited), and `limited_min_time_s` applies."""
        return first_reason(self.criteria, Progress(samples, elapsed_s, limited))
