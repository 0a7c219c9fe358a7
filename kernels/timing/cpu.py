"""Host-clock timing for CPU work: warm-up, calibrated calls per sample, adaptive repeats.

A sample is a loop of `calls` back-to-back calls timed with time.perf_counter_ns; calibration
picks `calls` so that one sample lasts at least `min_sample_s`, which keeps the clock's
resolution and the loop's own overhead far below the kernel's time (pyperf's approach)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..results import Measurement
from .sampling import Step, sample_until
from .stopping import Progress, StopRule

METHOD = "cpu-perf-counter"
MAX_CALLS_PER_SAMPLE = 1 << 20
NS_PER_US = 1_000.0


def _time_calls(fn: Callable[[], object], calls: int) -> float:
    """Seconds for `calls` back-to-back calls."""
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / 1e9


def calibrate(fn: Callable[[], object], min_sample_s: float) -> tuple[int, int, float]:
    """(calls per sample, calls made while calibrating, seconds of the last loop). Doubles until
    a loop lasts long enough."""
    calls, made = 1, 0
    while True:
        elapsed = _time_calls(fn, calls)
        made += calls
        if elapsed >= min_sample_s or calls >= MAX_CALLS_PER_SAMPLE:
            break
        # Jump close to the target, at least doubling.
        calls = min(MAX_CALLS_PER_SAMPLE, max(2 * calls, math.ceil(calls * min_sample_s / max(elapsed, 1e-9))))
    return calls, made, elapsed


class _CpuSamples:
    """Samples of `calls` back-to-back calls; the calibration's last loop, when it lasted a whole
    sample, is the first (`first_s`: its seconds)."""

    def __init__(self, fn: Callable[[], object], calls: int, first_s: float | None) -> None:
        self.fn, self.calls, self.first_s = fn, calls, first_s
        self.samples: list[float] = []
        self.start = time.perf_counter() - (first_s or 0.0)

    def take(self) -> Step:
        if self.first_s is not None:
            seconds, self.first_s = self.first_s, None
        else:
            seconds = _time_calls(self.fn, self.calls)
        self.samples.append(seconds / self.calls * 1e6)
        return Step(Progress(self.samples, time.perf_counter() - self.start))

    def pause(self) -> None:
        """Samples follow each other without a rest."""


def measure(fn: Callable[[], object], rule: StopRule, min_sample_s: float) -> Measurement:
    """Warm up (the calibration calls), then take samples until the rule says stop.

    The loop that ends calibration ran `calls` back-to-back warm calls for at least
    `min_sample_s`, exactly as a sample does, so it is the first sample (as in the collective
    timer): a call slower than twice the time cap (a large GEMM under emulation, minutes per call)
    then costs the harness's warm-up call and this one, not a third."""
    calls, warmup, last = calibrate(fn, min_sample_s)
    first = last if last >= min_sample_s else None
    if first is not None:
        warmup -= calls
    source = _CpuSamples(fn, calls, first)
    reason = sample_until(source, rule.criteria)
    return Measurement.of(
        source.samples,
        method=METHOD,
        calls_per_sample=calls,
        warmup_calls=warmup,
        stop_reason=reason,
        target_rel_precision=rule.target_rel_precision,
    )
