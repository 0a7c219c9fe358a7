"""Samples taken while the measuring process stood still: recognised, so that the statistics leave them out.

A process that is paused while it times a loop (SIGSTOP and SIGCONT, a suspended terminal job, a virtual
machine descheduled by its host, memory swapped out) writes the pause into the one sample it was taking: a
20 s stop left one 20 s sample among 10 ms ones. The median hardly moves, but the mean and the maximum
do, and every report shows them. Such a sample measures the pause, not the kernel, so `Measurement.of`
(kernels/results.py) names it in `Measurement.stalled` and `TimeStats` are made of the other samples; the
raw samples keep it (whoever reads them sees what happened), the result is flagged `stalled`
(kernels/result_flags.py) and `deepbench check` applies the same rule to the samples a bundle holds.

The rule: a sample is stalled where it lasted at least STALL_MIN_S longer than the typical sample (the
lower median of all of them: robust while fewer than half are stalled), and at least STALL_RATIO times it.
Both must hold. The absolute floor is what tells a pause from noise: contention costs a thread a scheduler
slice at a time (milliseconds), cache misses a fraction of a call; neither adds a whole second to one loop
of calls that typically lasts a millisecond. The ratio keeps what slows every call down (a board that
throttles runs 3x slower, a noisy kernel's slow mode) from counting as a pause, while a pause of a
second makes a millisecond's sample a thousand times longer. The typical sample is never
stalled itself, so at least one sample always remains."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

STALL_MIN_S = 1.0  # a sample at least this much longer than the typical one took a pause, not a measurement
STALL_RATIO = 10.0  # ... and at least this many times the typical one
US_PER_S = 1e6


def stall_floor_us(typical_us: float, calls_per_sample: int) -> float:
    """The per-call time from which a sample of `calls_per_sample` calls is stalled, beside a typical
    sample of `typical_us` per call."""
    return max(STALL_RATIO * typical_us, typical_us + STALL_MIN_S * US_PER_S / max(1, calls_per_sample))


def stalled_samples(samples_us: Sequence[float], calls_per_sample: int) -> tuple[int, ...]:
    """The indices of the samples (each a per-call time in microseconds over `calls_per_sample` calls)
    that were taken while the process stood still (the module's rule); () for fewer than two samples."""
    if len(samples_us) < 2:
        return ()
    floor = stall_floor_us(statistics.median_low(samples_us), calls_per_sample)
    if max(samples_us) < floor:
        return ()
    return tuple(i for i, x in enumerate(samples_us) if x >= floor)


def kept_samples(samples_us: Sequence[float], stalled: Sequence[int]) -> list[float]:
    """The samples the statistics are made of: all but the stalled ones."""
    if not stalled:
        return list(samples_us)
    left_out = set(stalled)
    return [x for i, x in enumerate(samples_us) if i not in left_out]
