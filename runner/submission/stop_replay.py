"""Why sampling stopped, re-derived from a measurement's samples and the run's settings, never taken on trust.

The harness takes one sample at a time and asks its stop rule after each (kernels/timing/sampling.py;
the rule: kernels/timing/stopping.py, built from the settings by harness/execute.py `stop_rule`): the
first criterion whose conditions hold gives the reason. So a measurement's samples are a record of every
decision: after k samples the rule saw those k samples and the seconds elapsed since sampling began. The
checker asks the same rule the same questions:

- at every k before the last, did the rule certainly stop? Then the harness stopped there, and a result
  holding more samples was added to (a laundered result keeps the fastest fifth of its samples: they
  converge within the first few);
- at the last, could the rule give the reason the result claims? `converged` needs the noise target met
  on these samples, enough of them and the minimum time; `time-cap` needs the time and a noise the rule
  did not already accept; `max-samples` the cap itself.

What the bundle cannot prove is the time. A sample is a time per call over `calls_per_sample` calls, so
the seconds the samples themselves lasted are a lower bound of the elapsed time at each k (a stalled
sample's pause is left out of the bound: kernels/stalls.py), and the result's own span (started_at to
ended_at) an upper bound at the end. A rule's conditions on time only ask for at least so many seconds, so
a criterion that holds at the lower bound held, and one that fails at the upper bound failed; between the
two, every threshold the rule names is tried. The flags a GPU's stretch carries (`limited`, `calm`:
Progress's boolean fields) are not recorded either: a stop must hold whatever they were, a claim under one
of them.

Where the samples are not the sequence the rule judged, only the last decision is re-derived: on a GPU
the stretch the rule judges starts over when the clock moves, and leaves throttled samples out
(kernels/timing/clocked.py); a result that kept throttled samples (flagged `throttled`) is not replayed.
Asking the rule at every k costs a sort each time (minutes for a 200 MB results file). The scan instead
finds where each criterion's counts and times hold for certain, takes the samples after that a block at a
time, passes over a block whose every prefix's noise is bounded above the target by the sorted samples
before it, reads the others sample by sample from the sorted prefix (the quartiles as statistics.quantiles
reads them), and asks the rule itself only where the scan finds it would stop. If the rule gains a condition
the scan does not know, the rule is asked at every k: slower, never wrong."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...kernels.results import Measurement
from ...kernels.timing.stopping import (
    NOTCH_FACTOR,
    CallBudget,
    Criteria,
    MinSamples,
    MinTime,
    NoiseBelow,
    Progress,
    Stop,
    first_reason,
)

US_PER_S = 1e6
# A lower bound at a threshold, give or take float summation: only a bound clear of it is certain.
SUM_RTOL = 1e-9
# The scan's noise is the rule's own formula on the same sorted samples; this only admits a candidate
# the rule itself then judges (never a stop the rule would not make).
SCAN_RTOL = 1e-9
# The result's span bounds a part's sampling time, give or take the clock's resolution.
SPAN_SLACK_S = 1e-3
# The noise scan takes samples in blocks of this share of those so far (at least MIN_BLOCK): small enough
# that the bound on a block's noise stays close to the noise itself, large enough to pass over most.
BLOCK_SHARE = 32
MIN_BLOCK = 8


@dataclass(frozen=True)
class Judged:
    """What the rule saw of one measurement: its samples in order, a lower bound of the seconds elapsed
    after each (lower_s[k] after k samples), an upper bound at the end, the values Progress's flags may
    have had, the samples the hard limits counted beside these, and whether every prefix was a decision
    of the rule on exactly these samples (then the whole sequence is replayed)."""

    samples: Sequence[float]
    lower_s: np.ndarray
    upper_s: float
    flags: tuple[dict[str, bool], ...]
    other_samples: int = 0
    every_prefix: bool = True


def judged_of(m: Measurement, span_s: float, gpu: bool, every_prefix: bool, other_samples: int = 0) -> Judged:
    """The Judged of a measurement whose result spans `span_s` seconds; `gpu`: its stretch's flags are
    unknown (else every flag is False, as the CPU and collective timers leave them)."""
    per_s = m.calls_per_sample / US_PER_S
    seconds = np.asarray(m.samples_us, dtype=np.float64) * per_s
    seconds[list(m.stalled)] = 0.0
    lower = np.concatenate(([0.0], np.cumsum(seconds)))
    return Judged(m.samples_us, lower, span_s + SPAN_SLACK_S, flag_values(gpu), other_samples, every_prefix)


def flag_values(unknown: bool) -> tuple[dict[str, bool], ...]:
    """Progress's boolean fields (limited, calm ...): all False, or every combination where unknown."""
    names = [f.name for f in dataclasses.fields(Progress) if f.type in ("bool", bool)]
    if not unknown:
        return ({},)
    return tuple(dict(zip(names, combo, strict=True)) for combo in itertools.product((False, True), repeat=len(names)))


def stop_problem(claimed: str, judged: Judged, rule: Criteria, limits: Criteria = ()) -> str | None:
    """Why `claimed` cannot be the reason the rule (then the limits, on every sample) stopped these
    samples; None where it can be."""
    n = len(judged.samples)
    if judged.every_prefix:
        early = first_certain_stop(judged, rule, limits)
        if early is not None:
            k, reason = early
            return (
                f"its first {k} samples already met the stop rule ({reason}): the harness stops there, "
                f"yet it holds {n} (samples added, removed or reordered, or other settings)"
            )
    possible = possible_reasons(judged, rule, limits)
    if claimed in possible:
        return None
    said = ", ".join(sorted(possible)) if possible else "no reason to stop yet"
    return f"stop reason {claimed!r} does not follow from its {n} samples and the run's settings (they give: {said})"


# ----- the last decision -------------------------------------------------------------------------
def possible_reasons(judged: Judged, rule: Criteria, limits: Criteria = ()) -> set[str]:
    """Every reason the rule (then the limits) can give after all the samples, over the elapsed times the
    bounds allow and the flags' possible values."""
    xs = list(judged.samples)
    lo = float(judged.lower_s[-1])
    out: set[str] = set()
    for flags in judged.flags:
        for elapsed in _times(rule, limits, xs, flags, lo, judged.upper_s):
            reason = first_reason(rule, Progress(xs, elapsed, **flags))
            if reason is None and limits:
                reason = first_reason(limits, Progress(_overall(xs, judged.other_samples), elapsed))
            if reason:
                out.add(reason)
    return out


def _overall(xs: list[float], others: int) -> list[float]:
    """Every sample the hard limits counted: these and the others (only their number matters to them)."""
    return xs + [xs[-1]] * others if others else xs


def _times(
    rule: Criteria, limits: Criteria, xs: list[float], flags: dict[str, bool], lo: float, hi: float
) -> set[float]:
    """The elapsed times at which the criteria's answers can differ within [lo, hi]: the bounds and
    every time threshold a condition names in between (conditions ask for at least so many seconds)."""
    out = {lo, max(lo, hi)}
    for criterion in (*rule, *limits):
        for c in criterion.conditions:
            for t in _thresholds(c, xs, flags):
                if lo < t < hi:
                    out.add(t)
    return out


def _thresholds(c: Any, xs: list[float], flags: dict[str, bool]) -> list[float]:
    """The seconds a time condition may ask for: its numbers, and what it needs of this progress."""
    found: list[float] = []
    needed = getattr(c, "needed", None)
    if callable(needed):
        found.append(float(needed(Progress(xs, 0.0, **flags))))
    if dataclasses.is_dataclass(c):
        for f in dataclasses.fields(c):
            value = getattr(c, f.name)
            if isinstance(value, float) and f.name.endswith("seconds"):
                found.append(value)
    return found


# ----- the decisions before ----------------------------------------------------------------------
def first_certain_stop(judged: Judged, rule: Criteria, limits: Criteria = ()) -> tuple[int, str] | None:
    """The fewest samples k (before the last) after which the rule or the limits certainly stopped,
    with the reason; None where they never did. The scan proposes, the rule disposes: each candidate
    is judged by first_reason itself, under every value of the flags."""
    n = len(judged.samples)
    fixed: set[int] = set()
    scanned: list[tuple[int, float]] = []  # (from which k, target) of each criterion with a noise condition
    for criterion in (*rule, *limits):
        start, target, unknown = _start(criterion, judged)
        if start >= n:
            continue
        if unknown:
            fixed.update(range(start, n))
        elif target is None:
            fixed.add(start)
        else:
            scanned.append((start, target))
    best: tuple[int, str] | None = None
    for k in sorted(fixed):
        reason = _certain(judged, rule, limits, k)
        if reason is not None:
            best = (k, reason)
            break
    for start, target in scanned:
        for k in _noise_candidates(judged.samples, start, best[0] if best else n, target):
            reason = _certain(judged, rule, limits, k)
            if reason is not None:
                best = (k, reason)
                break
    return best


def _certain(judged: Judged, rule: Criteria, limits: Criteria, k: int) -> str | None:
    """The reason the loop stopped after k samples whatever the flags were (None if it may have gone on)."""
    xs = list(judged.samples[:k])
    reasons = set()
    for flags in judged.flags:
        reason = first_reason(rule, Progress(xs, float(judged.lower_s[k]), **flags))
        if reason is None and limits:
            reason = first_reason(limits, Progress(xs, float(judged.lower_s[k])))
        if reason is None:
            return None
        reasons.add(reason)
    return ", ".join(sorted(reasons))


def _start(criterion: Stop, judged: Judged) -> tuple[int, float | None, bool]:
    """(the fewest samples from which this criterion's counts and times hold for certain, its noise
    target if it has one, whether it has a condition the scan does not know: then the rule is asked at
    every k from there)."""
    start, target, unknown = 1, None, False
    for c in criterion.conditions:
        if isinstance(c, MinSamples):
            start = max(start, c.count)
        elif isinstance(c, CallBudget):
            start = max(start, c.max_calls // c.calls_per_sample)
        elif isinstance(c, MinTime):
            start = max(start, _first_time(judged, _most_needed(c, judged)))
        elif isinstance(c, NoiseBelow):
            target = c.target
        else:
            unknown = True
    return start, target, unknown


def _most_needed(c: MinTime, judged: Judged) -> float:
    """The most seconds a time condition may ask for under the flags' possible values (a GPU stretch's
    calm floor is never above its whole floor: kernels/timing/stopping.py)."""
    limited = any(f.get("limited") for f in judged.flags)
    return max(c.seconds, c.limited_seconds) if limited else c.seconds


def _first_time(judged: Judged, seconds: float) -> int:
    """The fewest samples whose lower bound of the elapsed time is clear of `seconds`."""
    if seconds <= 0:
        return 0
    return int(np.searchsorted(judged.lower_s, seconds * (1 + SUM_RTOL), side="left"))


def _noise_candidates(samples: Sequence[float], start: int, stop: int, target: float) -> Iterator[int]:
    """The k in [start, stop) whose first k samples' noise (stopping.relative_precision) is within
    `target`, in order. The samples are taken a block at a time: a block whose every prefix's noise is
    bounded above the target (_may_converge) is passed over; the others are read sample by sample from
    the sorted prefix, the quartiles as statistics.quantiles(method='inclusive') reads them."""
    xs = np.asarray(samples, dtype=np.float64)
    bound = target * (1 + SCAN_RTOL)
    k0 = max(start - 1, 0)  # the prefix held sorted in `ordered`
    ordered = np.sort(xs[:k0])
    while k0 < stop - 1:
        size = min(max(MIN_BLOCK, k0 // BLOCK_SHARE), stop - 1 - k0)
        if _may_converge(ordered, k0, size, bound):
            exact = ordered.tolist()
            for k in range(k0 + 1, k0 + size + 1):
                bisect.insort(exact, samples[k - 1])
                if k >= max(start, 2) and _noise(exact, k) <= bound:
                    yield k
        block = np.sort(xs[k0 : k0 + size])
        ordered = np.insert(ordered, np.searchsorted(ordered, block), block)
        k0 += size


def _may_converge(ordered: np.ndarray, k0: int, size: int, bound: float) -> bool:
    """Whether some prefix of k0 + j samples (1 <= j <= size) may have its noise within `bound`, known
    from the first k0 sorted alone: adding j samples moves the i-th smallest to between the first k0's
    (i-j)-th and i-th, which bounds q1 and the median from above and q3 from below."""
    if not k0:
        return True  # nothing known yet
    j = np.arange(1, size + 1)
    k = k0 + j
    m = k - 1
    i1, i3, im = m // 4 + 1, (3 * m) // 4, k // 2
    q1_hi = ordered[np.minimum(i1, k0 - 1)]  # the i-th smallest of the k samples is at most ordered[i] ...
    q1_hi[i1 >= k0] = np.inf
    med_hi = ordered[np.minimum(im, k0 - 1)]
    med_hi[im >= k0] = np.inf
    q3_lo = ordered[np.maximum(i3 - j, 0)]  # ... and at least ordered[i - j] (a sample is positive)
    q3_lo[i3 - j < 0] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = NOTCH_FACTOR * (q3_lo - q1_hi) / np.sqrt(k) / med_hi
    return bool(np.any(~(low > bound * (1 + SCAN_RTOL)) & (k >= 2)))


def _noise(s: list[float], k: int) -> float:
    """The half-width of the median's 95% interval over the median, of the k sorted samples `s`."""
    m = k - 1
    j1, d1 = divmod(m, 4)
    j3, d3 = divmod(3 * m, 4)
    q1 = (s[j1] * (4 - d1) + s[j1 + 1] * d1) / 4
    q3 = (s[j3] * (4 - d3) + s[j3 + 1] * d3) / 4
    med = s[k // 2] if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2
    return math.inf if med <= 0 else NOTCH_FACTOR * (q3 - q1) / math.sqrt(k) / med
