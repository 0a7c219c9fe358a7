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
the stretch has to be longer still (`limited_min_time_s`).

That protection is for a GPU the limiter can act on. Where every reading of the stretch shows a calm
GPU (settling.calm: the clock at boost, NVML naming no slowdown, the board drawing well under its power
limit), nothing is settling, and a CUDA graph's samples of a light kernel agree to a fraction of a
percent within milliseconds: the floor then follows the samples' spread (`spread_floor`), from
`calm_min_time_s` for a tight series up to the whole `min_time_s` for a series as wide as
SPREAD_FULL_FLOOR. It only ever shortens the floor of the converged criterion, never the noise target
or the time cap: a series that converged under the whole floor converges under this one no later, and
one that did not, does not."""

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
# A calm stretch whose relative spread (IQR over median) reaches this keeps the whole min_time_s; a tighter one
# needs the floor in proportion (spread_floor). 1%: the default target's noise; a graph-replayed light kernel's
# samples typically spread a tenth of that.
SPREAD_FULL_FLOOR = 0.01
# The spread is read from this many samples on (an IQR over fewer is luck): fewer keep the whole floor.
SPREAD_SAMPLES = 10


def relative_precision(samples: Sequence[float]) -> float:
    """Half-width of the median's 95% CI over the median (inf with fewer than 2 samples)."""
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    return NOTCH_FACTOR * (q3 - q1) / math.sqrt(len(samples)) / med


def relative_spread(samples: Sequence[float]) -> float:
    """The samples' interquartile range over their median (inf with fewer than 2 samples)."""
    if len(samples) < 2:
        return math.inf
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q3 - q1) / med if med > 0 else math.inf


def spread_floor(samples: Sequence[float], full_s: float, least_s: float) -> float:
    """The minimum time a calm stretch needs (see the module's docstring): `full_s` scaled by the samples'
    relative spread over SPREAD_FULL_FLOOR, at least `least_s`, at most `full_s`; `full_s` until
    SPREAD_SAMPLES samples say what the spread is."""
    if len(samples) < SPREAD_SAMPLES:
        return full_s
    share = min(1.0, relative_spread(samples) / SPREAD_FULL_FLOOR)
    return min(full_s, max(least_s, full_s * share))


@dataclass(frozen=True)
class Progress:
    """What the criteria judge: the samples so far, the seconds they took, whether the power
    limiter holds the clock (settling.stretch_limited), and whether every reading of the stretch
    showed a calm GPU (settling.calm)."""

    samples: Sequence[float]
    elapsed_s: float
    limited: bool = False
    calm: bool = False


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
    that is longer; on a calm GPU, the floor that follows the spread (spread_floor) down to
    `calm_seconds` where that is given and shorter."""

    seconds: float
    limited_seconds: float = 0.0
    calm_seconds: float | None = None

    def needed(self, progress: Progress) -> float:
        """The seconds this progress must have taken."""
        if progress.limited:
            return max(self.seconds, self.limited_seconds)
        if progress.calm and self.calm_seconds is not None and self.calm_seconds < self.seconds:
            return spread_floor(progress.samples, self.seconds, self.calm_seconds)
        return self.seconds

    def met(self, progress: Progress) -> bool:
        return progress.elapsed_s >= self.needed(progress)


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
    calm_min_time_s: float | None = None  # the least the floor drops to on a calm GPU (None: never shorter)

    @property
    def min_time(self) -> MinTime:
        """The converged criterion's floor."""
        return MinTime(self.min_time_s, self.limited_min_time_s, self.calm_min_time_s)

    @cached_property
    def criteria(self) -> tuple[Stop, ...]:
        """The rule as criteria, in the order they are tested."""
        enough = MinSamples(self.min_samples)
        return (
            Stop(MAX_SAMPLES, MinSamples(self.max_samples)),
            Stop(CONVERGED, enough, self.min_time, NoiseBelow(self.target_rel_precision)),
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

    def decide(
        self, samples: Sequence[float], elapsed_s: float, limited: bool = False, calm: bool = False
    ) -> str | None:
        """The reason to stop now, or None to take another sample. `limited`: the power limiter
        holds the clock (settling.power_limited), and `limited_min_time_s` applies; `calm`: every
        reading showed a calm GPU (settling.calm), and the floor follows the spread."""
        return first_reason(self.criteria, Progress(samples, elapsed_s, limited, calm))
