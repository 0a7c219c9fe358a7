"""Stopping rules and the CPU timer, on synthetic samples and a known sleep."""

from __future__ import annotations

import time

from deepbench.kernels.timing import cpu
from deepbench.kernels.timing.stopping import CONVERGED, MAX_SAMPLES, TIME_CAP, StopRule, relative_precision


def test_relative_precision_shrinks_with_samples() -> None:
    noisy = [100.0, 110.0, 90.0, 105.0, 95.0] * 4
    assert relative_precision(noisy[:5]) > relative_precision(noisy)
    assert relative_precision([5.0]) == float("inf")
    assert relative_precision([5.0] * 10) == 0.0


def test_stop_rule_reasons() -> None:
    rule = StopRule(target_rel_precision=0.01, min_samples=5, max_samples=50, time_cap_s=1.0)
    assert rule.decide([1.0] * 4, 0.0) is None  # below min samples
    assert rule.decide([1.0] * 5, 0.0) == CONVERGED
    wild = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert rule.decide(wild, 0.5) is None
    assert rule.decide(wild, 1.5) == TIME_CAP
    assert rule.decide(wild * 10, 0.1) == MAX_SAMPLES
    assert rule.decide([1.0], 2.5) == TIME_CAP  # a very slow kernel stops at twice the cap


def test_cpu_timer_measures_a_known_delay() -> None:
    # max_samples above what the time cap allows (0.5 s of 2 ms samples): a sleep the scheduler makes noisy
    # then stops at the cap instead of at 30 samples (max-samples: one CI run on a busy 2-core machine)
    rule = StopRule(target_rel_precision=0.05, min_samples=3, max_samples=1000, time_cap_s=0.5)
    m = cpu.measure(lambda: time.sleep(0.002), rule, min_sample_s=0.001)
    assert m.calls_per_sample == 1
    assert 1900 <= m.stats.median <= 4000  # 2 ms, plus the scheduler's slack
    assert m.stop_reason in (CONVERGED, TIME_CAP)


def test_calibration_batches_fast_calls() -> None:
    calls, made, last = cpu.calibrate(lambda: None, min_sample_s=0.001)
    assert calls > 100 and made >= calls and last >= 0.001


def test_a_call_slower_than_twice_the_cap_costs_one_timed_call() -> None:
    """The loop that ends calibration is the first sample: a very slow call is timed once (and
    the stopping rule's twice-the-cap limit stops there), not calibrated and then sampled."""
    made = []
    rule = StopRule(target_rel_precision=0.01, min_samples=5, max_samples=100, time_cap_s=0.01)
    m = cpu.measure(lambda: (made.append(1), time.sleep(0.03)), rule, min_sample_s=0.001)
    assert len(made) == 1 and m.stats.n == 1 and m.warmup_calls == 0 and m.stop_reason == TIME_CAP
    assert m.stats.median >= 30_000
