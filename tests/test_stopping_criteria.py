"""The stopping criteria as small objects, and StopRule as their composition: each criterion
alone, their order, and the composed rule against the rule as it was written before it was split
(a reference kept here), over a grid of sample series, times and limiter states; the floor that follows
the spread on a calm GPU against the whole floor."""

from __future__ import annotations

import itertools
import math
import random

from deepbench.kernels.timing.stopping import (
    CONVERGED,
    MAX_SAMPLES,
    REPEAT_COUNT,
    SPREAD_SAMPLES,
    TIME_CAP,
    CallBudget,
    MinSamples,
    MinTime,
    NoiseBelow,
    Progress,
    Stop,
    StopRule,
    first_reason,
    relative_precision,
    relative_spread,
    spread_floor,
)


def reference_decide(rule: StopRule, samples: list[float], elapsed_s: float, limited: bool) -> str | None:
    """StopRule.decide as one function, before it became criteria."""
    n = len(samples)
    if n >= rule.max_samples:
        return MAX_SAMPLES
    min_time = max(rule.min_time_s, rule.limited_min_time_s) if limited else rule.min_time_s
    if n >= rule.min_samples and elapsed_s >= min_time and relative_precision(samples) <= rule.target_rel_precision:
        return CONVERGED
    if n >= rule.min_samples and elapsed_s >= rule.time_cap_s:
        return TIME_CAP
    if n >= 1 and elapsed_s >= 2 * rule.time_cap_s:
        return TIME_CAP
    return None


def test_min_samples_counts_the_samples() -> None:
    assert not MinSamples(3).met(Progress([1.0, 1.0], 0.0))
    assert MinSamples(3).met(Progress([1.0] * 3, 0.0))
    assert MinSamples(0).met(Progress([], 0.0))


def test_min_time_takes_the_longer_minimum_only_while_limited() -> None:
    gate = MinTime(0.2, limited_seconds=1.0)
    assert not gate.met(Progress([1.0], 0.5, limited=True))
    assert gate.met(Progress([1.0], 0.5, limited=False))
    assert gate.met(Progress([1.0], 1.0, limited=True))
    assert MinTime(0.5, limited_seconds=0.1).met(Progress([1.0], 0.5, limited=True))  # never shorter than plain


def test_noise_below_uses_the_medians_relative_precision() -> None:
    steady, noisy = [5.0] * 6, [1.0, 9.0, 2.0, 8.0, 3.0, 7.0]
    assert NoiseBelow(0.01).met(Progress(steady, 0.0))
    assert not NoiseBelow(0.01).met(Progress(noisy, 0.0))
    assert NoiseBelow(math.inf).met(Progress(noisy, 0.0)) and not NoiseBelow(1e9).met(Progress([5.0], 0.0))


def test_call_budget_stops_before_the_next_sample_would_pass_it() -> None:
    budget = CallBudget(max_calls=10, calls_per_sample=3)
    assert not budget.met(Progress([1.0] * 2, 0.0))  # 9 timed calls would follow: within 10
    assert budget.met(Progress([1.0] * 3, 0.0))  # the 4th sample would make 12


def test_a_stop_needs_all_its_conditions_and_the_first_stop_that_holds_wins() -> None:
    both = Stop("both", MinSamples(2), MinTime(1.0))
    assert both.check(Progress([1.0, 1.0], 0.5)) is None
    assert both.check(Progress([1.0], 1.5)) is None
    assert both.check(Progress([1.0, 1.0], 1.5)) == "both"
    criteria = (Stop("first", MinSamples(5)), both, Stop("last", MinSamples(1)))
    assert first_reason(criteria, Progress([1.0, 1.0], 1.5)) == "both"
    assert first_reason(criteria, Progress([1.0] * 5, 1.5)) == "first"
    assert first_reason(criteria, Progress([1.0], 0.0)) == "last"
    assert first_reason((), Progress([1.0], 0.0)) is None


def test_the_noise_is_judged_only_once_the_cheap_conditions_hold() -> None:
    judged: list[int] = []

    class Counting(NoiseBelow):
        def met(self, progress: Progress) -> bool:
            judged.append(len(progress.samples))
            return super().met(progress)

    stop = Stop(CONVERGED, MinSamples(3), Counting(0.01))
    assert stop.check(Progress([5.0, 5.0], 0.0)) is None and judged == []
    assert stop.check(Progress([5.0] * 3, 0.0)) == CONVERGED and judged == [3]


def test_the_composed_rule_decides_as_the_rule_before_it() -> None:
    rng = random.Random(26)
    rules = [
        StopRule(0.01, 5, 50, 1.0),
        StopRule(0.05, 3, 20, 0.5, min_time_s=0.2, limited_min_time_s=1.0),
        StopRule(1e-6, 1, 1000, 10.0, min_time_s=4.0),
        StopRule(0.02, 10, 10, 2.0, limited_min_time_s=0.5),
    ]
    series = [[5.0] * n for n in (0, 1, 4, 5, 10, 60)]
    series += [[rng.gauss(10.0, spread) for _ in range(n)] for spread in (0.01, 0.5, 3.0) for n in (2, 5, 12, 40)]
    times = [0.0, 0.1, 0.2, 0.5, 0.99, 1.0, 1.5, 2.0, 4.0, 5.0, 20.0, 25.0]
    checked = set()
    for rule, samples, elapsed, limited in itertools.product(rules, series, times, (False, True)):
        got = rule.decide(samples, elapsed, limited)
        assert got == reference_decide(rule, samples, elapsed, limited), (rule, len(samples), elapsed, limited)
        checked.add(got)
    assert checked == {None, CONVERGED, TIME_CAP, MAX_SAMPLES}  # the grid reaches every decision


def test_hard_limits_cap_samples_and_twice_the_time_cap() -> None:
    rule = StopRule(0.01, 5, 8, 1.0)
    assert first_reason(rule.hard_limits, Progress([1.0] * 7, 1.9)) is None
    assert first_reason(rule.hard_limits, Progress([1.0] * 8, 0.0)) == MAX_SAMPLES
    assert first_reason(rule.hard_limits, Progress([1.0] * 8, 3.0)) == MAX_SAMPLES  # the cap is named first
    assert first_reason(rule.hard_limits, Progress([1.0], 2.0)) == TIME_CAP
    assert REPEAT_COUNT not in {s.reason for s in rule.criteria}


def test_the_floor_follows_the_spread_only_from_enough_samples() -> None:
    tight = [100.0 + 0.01 * (i % 3) for i in range(SPREAD_SAMPLES)]  # IQR 0.01 us over 100: 0.01%
    wide = [100.0 + (i % 4) for i in range(SPREAD_SAMPLES)]  # IQR ~1.5 us: past SPREAD_FULL_FLOOR
    assert spread_floor(tight, 0.2, 0.02) == 0.02  # the least
    assert spread_floor(wide, 0.2, 0.02) == 0.2  # the whole floor
    assert spread_floor(tight[:-1], 0.2, 0.02) == 0.2  # too few samples to say
    middling = [100.0 + 0.2 * (i % 4) for i in range(40)]  # IQR 0.3 us: 0.3% -> 30% of the floor
    assert 0.02 < spread_floor(middling, 0.2, 0.02) < 0.2
    assert math.isinf(relative_spread([1.0])) and relative_spread([2.0, 2.0]) == 0.0


def test_a_calm_floor_is_never_longer_and_the_limiter_keeps_its_own() -> None:
    gate = MinTime(0.2, limited_seconds=1.0, calm_seconds=0.02)
    tight = [5.0] * 30
    assert gate.met(Progress(tight, 0.03, calm=True)) and not gate.met(Progress(tight, 0.03))
    assert not gate.met(Progress(tight, 0.5, limited=True, calm=True))  # limited wins over calm
    assert MinTime(0.2).needed(Progress(tight, 0.0, calm=True)) == 0.2  # no calm floor asked for
    assert MinTime(0.0, calm_seconds=0.02).needed(Progress(tight, 0.0, calm=True)) == 0.0  # never longer


def _stops_at(rule: StopRule, series: list[float], step_s: float, calm: bool) -> tuple[str, int]:
    """The reason and the samples the rule stops at, samples `step_s` apart."""
    for n in range(1, len(series) + 1):
        reason = rule.decide(series[:n], n * step_s, calm=calm)
        if reason:
            return reason, n
    raise AssertionError("the series ended before the rule stopped")


def test_a_calm_floor_converges_sooner_and_flags_what_the_whole_floor_flagged() -> None:
    """Over many series (tight, middling, noisy, drifting): where the whole floor converged, the calm floor
    converges too, on as many samples or fewer; where the whole floor ran to the time cap, so does the calm
    one or it converges no later; a tight series converges in a fraction of the samples."""
    rng = random.Random(56)
    rule = StopRule(0.01, 5, 1000, 1.0, min_time_s=0.2, limited_min_time_s=1.0, calm_min_time_s=0.02)
    faster = 0
    for spread in (0.0001, 0.001, 0.005, 0.02, 0.2):
        for seed in range(6):
            rng.seed(seed * 100 + int(spread * 1e4))
            series = [100.0 * (1 + rng.gauss(0, spread)) for _ in range(2000)]
            whole, n_whole = _stops_at(rule, series, 0.001, calm=False)
            calm, n_calm = _stops_at(rule, series, 0.001, calm=True)
            assert n_calm <= n_whole
            if whole == CONVERGED:
                assert calm == CONVERGED
            if calm == TIME_CAP:
                assert whole == TIME_CAP
            faster += n_calm < n_whole
    tight = [100.0 * (1 + random.Random(1).gauss(0, 0.0001)) for _ in range(400)]
    assert _stops_at(rule, tight, 0.001, calm=True) == (CONVERGED, 20)  # 0.02 s of 1 ms samples, not 0.2 s
    assert _stops_at(rule, tight, 0.001, calm=False) == (CONVERGED, 200)
    assert faster >= 12
