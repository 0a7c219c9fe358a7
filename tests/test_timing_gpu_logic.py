"""The GPU timer's decisions that need no GPU: calls per graph, throttled-sample selection,
settling, the calm GPU's floor and the stopping loop, driven by a fake sampler and a fake clock."""

from __future__ import annotations

import itertools

import pytest

from deepbench.kernels.timing import clocked, cupti, eager, events, profiler_check, settling, warmup
from deepbench.kernels.timing.cupti_kernel import KernelTimes
from deepbench.kernels.timing.sampler import Sampler
from deepbench.kernels.timing.settling import ClockReading, SettleWatch, throttled
from deepbench.kernels.timing.stopping import CONVERGED, TIME_CAP, StopRule


def test_calls_for_reaches_min_sample_and_respects_cap() -> None:
    assert events.calls_for(5.0, 0.001, 2000) == 200  # 200 x 5 us = 1 ms
    assert events.calls_for(5000.0, 0.001, 2000) == 1  # a long kernel: one call
    assert events.calls_for(0.001, 0.001, 2000) == 2000  # capped
    assert events.calls_for(0.0, 0.001, 50) == 50  # no division by zero


def test_replays_covering_keeps_the_gpu_busy_within_bounds() -> None:
    assert events.replays_covering(0.1, 0.001) == 100
    assert events.replays_covering(0.1, 1.0) == 1  # at least one
    assert events.replays_covering(10.0, 1e-6) == events.MAX_WARM_REPLAYS  # capped


def test_flagged_samples_are_discarded_when_enough_remain() -> None:
    samples = [10.0, 10.1, 12.5, 10.0, 10.2, 12.4, 10.1]
    clocks = [1980, 1980, 1400, 1975, 1980, 1390, 1980]
    low = [False, False, True, False, False, True, False]
    kept, kept_clocks, discarded, throttled = clocked.select_unthrottled(samples, clocks, low, 3)
    assert discarded == 2 and throttled == 0
    assert 12.5 not in kept and 12.4 not in kept and len(kept) == len(kept_clocks) == 5


def test_all_throttled_keeps_samples_and_counts_them() -> None:
    samples = [12.0, 12.1, 12.2]
    kept, _, discarded, throttled = clocked.select_unthrottled(samples, [1400, 1400, 1410], [True] * 3, 3)
    assert kept == samples and discarded == 0 and throttled == 3


def test_no_clock_readings_keep_everything() -> None:
    kept, clocks, discarded, throttled = clocked.select_unthrottled([1.0, 2.0], [None, None], [False] * 2, 1)
    assert kept == [1.0, 2.0] and clocks == [] and discarded == throttled == 0


def at(mhz: float | None, *reasons: str) -> ClockReading:
    return ClockReading(mhz, tuple(reasons))


def test_power_cap_alone_is_not_throttling_but_heat_or_an_unknown_reason_is() -> None:
    assert not throttled(at(1440.0, "sw_power_cap"), 1980.0)  # the limiter's normal swing
    assert throttled(at(1440.0, "sw_power_cap", "sw_thermal"), 1980.0)
    assert throttled(ClockReading(1440.0, None), 1980.0)  # NVML could not say why
    assert not throttled(at(1600.0, "hw_slowdown"), 1980.0)  # above 75% of the reference
    assert not throttled(ClockReading(None, None), 1980.0)


def test_settle_watch_fires_once_at_the_first_move_between_boost_and_below() -> None:
    watch = SettleWatch()
    states = [watch.observe(at(mhz), 1980.0) for mhz in (1980, 1965, 1650, 1980, 1500)]
    assert states == [False, False, True, False, False]  # 1965 is within 2% of boost
    rising = SettleWatch()
    assert [rising.observe(at(mhz), 1980.0) for mhz in (1600, 1650, 1980)] == [False, False, True]


def test_run_samples_stops_on_convergence_with_fake_clock() -> None:
    ticks = itertools.count()
    sampler = Sampler("fake", 10, take=lambda: 5.0)
    rule = StopRule(target_rel_precision=0.01, min_samples=5, max_samples=100, time_cap_s=1e9)
    got = clocked.run_samples(sampler, rule, lambda: at(1980.0), now=lambda: float(next(ticks)))
    assert got.reason == CONVERGED and len(got.samples) == 5 and [r.mhz for r in got.readings] == [1980.0] * 5
    assert got.settle_samples == 0


def test_run_samples_stops_at_time_cap_when_noisy() -> None:
    values = itertools.cycle([1.0, 3.0, 2.0, 5.0])
    ticks = itertools.count()
    sampler = Sampler("fake", 1, take=lambda: next(values))
    rule = StopRule(target_rel_precision=1e-6, min_samples=3, max_samples=1000, time_cap_s=10)
    got = clocked.run_samples(sampler, rule, lambda: ClockReading(), now=lambda: float(next(ticks)))
    assert got.reason == TIME_CAP and 3 <= len(got.samples) <= 11


def test_throttled_samples_do_not_count_and_trigger_a_rest() -> None:
    ticks = itertools.count()
    clocks = iter([at(1980.0)] + [at(1400.0, "hw_thermal")] * 2 + [at(1980.0)] * 20)
    rests: list[float] = []
    sampler = Sampler("fake", 1, take=lambda: 5.0)
    rule = StopRule(target_rel_precision=0.01, min_samples=3, max_samples=100, time_cap_s=1e9)
    got = clocked.run_samples(
        sampler, rule, lambda: next(clocks), now=lambda: float(next(ticks)), reference=lambda: 1980.0, rest=rests.append
    )
    # The thermal dip is the clock's first move: the first two samples are left out as settling.
    assert got.reason == CONVERGED and got.settle_samples == 2 and got.low[0] is True
    assert rests == [clocked.RECOVERY_S] * 2


def test_samples_before_the_limiter_moves_the_clock_are_left_out() -> None:
    ticks = itertools.count()
    # A heavy kernel after idle: full clock and fast for three samples, then the power limiter.
    boosted, limited = [(4.0, at(1980.0))] * 3, [(5.0, at(1600.0, "sw_power_cap"))] * 20
    series = iter(boosted + limited)
    current: list = [None]

    def take() -> float:
        current[0] = next(series)
        return current[0][0]

    sampler = Sampler("fake", 1, take=take)
    rule = StopRule(target_rel_precision=0.01, min_samples=3, max_samples=100, time_cap_s=1e9, min_time_s=4)
    got = clocked.run_samples(
        sampler,
        rule,
        lambda: current[0][1],
        now=lambda: float(next(ticks)),
        reference=lambda: 1980.0,
        rest=lambda s: None,
    )
    assert got.settle_samples == 4 and set(got.samples) == {5.0} and not any(got.low)
    assert got.settle_s > 0 and got.reason == CONVERGED


def test_always_throttled_stops_at_twice_the_cap() -> None:
    ticks = itertools.count()
    sampler = Sampler("fake", 1, take=lambda: 5.0)
    rule = StopRule(target_rel_precision=0.01, min_samples=3, max_samples=100, time_cap_s=5)
    got = clocked.run_samples(
        sampler,
        rule,
        lambda: ClockReading(1000.0, None),
        now=lambda: float(next(ticks)),
        reference=lambda: 1980.0,
        rest=lambda s: None,
    )
    assert got.reason == TIME_CAP and len(got.samples) <= 11


def test_min_time_holds_convergence_until_enough_time_has_passed() -> None:
    rule = StopRule(target_rel_precision=0.01, min_samples=3, max_samples=1000, time_cap_s=10, min_time_s=0.5)
    steady = [5.0] * 10
    assert rule.decide(steady, elapsed_s=0.1) is None
    assert rule.decide(steady, elapsed_s=0.5) == CONVERGED


def test_kernel_spans_group_a_calls_kernels() -> None:
    # two calls of two kernels each (a GEMM and its split-K reduction), gaps 0.2 inside, 0.5 between
    intervals = [(0.0, 4.0), (4.2, 5.0), (5.5, 9.5), (9.7, 10.5)]
    assert cupti.kernel_spans(intervals, 2) == [5.0, 5.0]
    assert cupti.kernel_spans(intervals, 0) == []


def test_profiled_samples_are_split_at_the_spin_markers() -> None:
    # the warm replays' tail, then two samples of two calls each (one kernel a call), each sample
    # preceded by the harness's spin kernel; the second sample ran 10% slower
    events = [
        (0.0, 3.0, "gemm"),
        (3.1, 203.0, "spin_kernel(long)"),
        (203.2, 207.2, "gemm"),
        (207.5, 211.5, "gemm"),
        (212.0, 412.0, "spin_kernel(long)"),
        (412.2, 416.6, "gemm"),
        (416.9, 421.3, "gemm"),
    ]
    groups = cupti.split_at_markers(events)
    assert [len(g) for g in groups] == [2, 2]
    figures = cupti.sample_figures(groups, calls=2, timed=[4.4, 4.84])
    assert abs(figures["kernel_us"] - (4.0 + 4.4) / 2) < 1e-9  # median of the per-sample busy times
    assert abs(figures["period_us"] - (4.15 + 4.55) / 2) < 1e-9  # adds the gap between calls
    assert figures["kernels_per_call"] == 1.0 and figures["kernel_names"] == ["gemm"]
    assert abs(figures["timer_ratio"] - 1.1) < 1e-9 and abs(figures["events_us"] - 4.62) < 1e-9
    assert cupti.split_at_markers(events[:1]) == []  # no marker: no sample


def test_call_time_is_the_mean_span_of_a_calls_kernels() -> None:
    # two calls of a GEMM and its split-K reduction: the wait inside a call counts, the gap between calls not
    group = [(0.0, 4.0, "gemm"), (4.2, 5.0, "reduce"), (5.5, 9.5, "gemm"), (9.7, 10.7, "reduce")]
    assert abs(cupti.call_time_us(group, 2) - (5.0 + 5.2) / 2) < 1e-9
    # kernels that do not divide among the calls: the sample's period per call, gaps included
    assert abs(cupti.call_time_us(group[:3], 2) - 9.5 / 2) < 1e-9


def test_chunk_times_cut_a_replay_into_samples_of_consecutive_calls() -> None:
    calls = [(10.0 * i, 10.0 * i + 4.0 + (i // 2) * 0.2, "gemm") for i in range(5)]  # spans 4.0 4.0 4.2 4.2 4.4
    assert [round(t, 9) for t in cupti.chunk_times_us(calls, 5, 2)] == [4.0, 4.2]  # the 5th call: no whole chunk
    assert cupti.chunk_times_us(calls[:4], 5, 2) == [cupti.call_time_us(calls[:4], 5)]  # kernels do not divide


def test_kernel_times_take_spans_and_fall_back_to_events_for_a_record_it_cannot_split(monkeypatch) -> None:
    monkeypatch.setattr(cupti, "start_once", lambda: None)
    kt = KernelTimes(replay=lambda: None, calls=4, sample_s=0.05, chunk=2)
    assert kt.per_batch == 1  # 0.05 s of 50 ms replays
    replay = [(10.0 * i, 10.0 * i + 4.0 + (i // 2) * 0.2, "gemm") for i in range(4)]  # spans 4.0 4.0 4.2 4.2
    batches = iter(
        [
            ([replay], [4.6]),  # the first batch: CUPTI can time these calls
            ([replay], [4.5, 4.7]),  # one replay's marker missing
        ]
    )
    kt._batch = lambda replays: next(batches)
    assert kt.start() is None
    assert [round(kt.take(), 9), round(kt.take(), 9)] == [4.0, 4.2]  # chunks of kernel spans, not the events' 4.6
    assert kt.notes["graph_events_us"] == 4.6  # the events' period kept beside them
    assert [kt.take(), kt.take()] == [4.5, 4.7]
    assert kt.notes["samples_timed_by_events"] == 2
    assert kt.notes["graph_events_us"] == 4.6


def test_kernel_times_say_why_not_when_the_first_batch_cannot_be_split(monkeypatch) -> None:
    monkeypatch.setattr(cupti, "start_once", lambda: None)
    kt = KernelTimes(replay=lambda: None, calls=4, sample_s=0.05, chunk=2)
    kt._batch = lambda replays: ([[(0.0, 4.0, "gemm")] * 3], [4.6])  # 3 kernels for 4 calls
    assert "3 GPU activities" in (kt.start() or "")
    assert not kt.pending


def test_timings_of_host_launches_say_when_cupti_was_attached(monkeypatch) -> None:
    """Eager and cold timings count host launches, which CUPTI slows once started (cupti.py)."""
    monkeypatch.setattr(cupti, "_started", False)
    assert eager.host_launch_notes() == {}
    monkeypatch.setattr(cupti, "_started", True)
    assert eager.host_launch_notes() == {"cupti_attached": True}


def _failing_part(error: float):
    from deepbench.kernels.backends.contract.base import TimedPart
    from deepbench.kernels.results import Check

    return TimedPart(
        "bwd_filter",
        run=lambda: None,
        flops=1.0,
        min_bytes=1.0,
        check=lambda: Check(passed=False, method="sampled-fp64", error=error, tolerance=1e-4),
    )


def test_fp32_winograd_conv_is_held_to_the_transform_tolerance(monkeypatch) -> None:
    from deepbench.kernels.precision import TRANSFORM_TOLERANCE, Precision
    from deepbench.kernels.reference import conv

    names = {"kernel_names": ["winograd_nonfused::winogradWgradDelta9x9_5x5"]}
    monkeypatch.setattr(profiler_check, "profiler_kernel_us", lambda fn, calls: names)
    part = _failing_part(7.2e-4)
    result = conv.transform_aware(part, Precision.FP32)()
    assert result.passed and result.tolerance == TRANSFORM_TOLERANCE[Precision.FP32] and "Winograd" in result.detail
    assert part.info["kernels"] == names["kernel_names"]
    assert not conv.transform_aware(_failing_part(5e-3), Precision.FP32)().passed  # TF32-sized error still fails


def test_fp32_direct_conv_keeps_the_fp32_tolerance(monkeypatch) -> None:
    from deepbench.kernels.precision import Precision
    from deepbench.kernels.reference import conv

    monkeypatch.setattr(
        profiler_check, "profiler_kernel_us", lambda fn, calls: {"kernel_names": ["implicit_convolve_sgemm"]}
    )
    result = conv.transform_aware(_failing_part(7.2e-4), Precision.FP32)()
    assert not result.passed and result.tolerance == 1e-4


def test_power_limited_needs_the_cap_and_a_clock_below_boost() -> None:
    assert settling.power_limited(at(1500.0, "sw_power_cap"), 1980.0)
    assert not settling.power_limited(at(1980.0, "sw_power_cap"), 1980.0)  # the flag lingers after a heavy kernel
    assert not settling.power_limited(at(1500.0), 1980.0)


def test_a_power_limited_stretch_is_measured_for_the_longer_minimum() -> None:
    rule = StopRule(
        target_rel_precision=0.01, min_samples=3, max_samples=1000, time_cap_s=100, min_time_s=2, limited_min_time_s=6
    )
    ticks = itertools.count()
    sampler = Sampler("fake", 1, take=lambda: 5.0)
    light = clocked.run_samples(
        sampler, rule, lambda: at(1980.0), now=lambda: float(next(ticks)), reference=lambda: 1980.0
    )
    ticks = itertools.count()
    heavy = clocked.run_samples(
        sampler, rule, lambda: at(1500.0, "sw_power_cap"), now=lambda: float(next(ticks)), reference=lambda: 1980.0
    )  # a boost clock seen earlier in the process
    assert len(light.samples) == 3 and len(heavy.samples) == 6 and heavy.reason == CONVERGED


def test_a_stretch_limited_half_the_time_gets_the_longer_minimum() -> None:
    """A limiter that holds the clock for every other reading is swinging (a majority rule took
    such stretches for steady ones): the longer minimum applies; one reading in ten does not."""
    rule = StopRule(
        target_rel_precision=0.01, min_samples=3, max_samples=1000, time_cap_s=100, min_time_s=4, limited_min_time_s=12
    )
    sampler = Sampler("fake", 1, take=lambda: 5.0)

    def samples_taken(every: int) -> int:
        ticks, count = itertools.count(), itertools.count()

        def reading() -> ClockReading:
            return at(1500.0, "sw_power_cap") if next(count) % every == 1 else at(1980.0)

        return len(
            clocked.run_samples(
                sampler, rule, reading, now=lambda: float(next(ticks)), reference=lambda: 1980.0
            ).samples
        )

    assert samples_taken(2) == 11  # 12 s of samples, counted from the clock's first move
    assert samples_taken(10) == 3  # the ordinary 4 s


def test_warm_up_settles_when_the_temperature_stops_rising() -> None:
    rising = [(float(t), 40.0 + t) for t in range(12)]
    flat = [(float(t), 60.0 + (0.5 if t > 5 else 0.0)) for t in range(12)]
    assert not warmup.settled(rising) and warmup.settled(flat)
    assert not warmup.settled(flat[:5])  # not yet a whole window of readings


class _Captured(BaseException):
    """Raised by a stand-in for graph.capture: the timer got as far as capturing."""


def _no_capture(fn, calls):
    raise _Captured(calls)


def test_a_call_that_fills_a_sample_is_estimated_once(monkeypatch) -> None:
    from deepbench.kernels.timing import graph

    asked: list[int] = []

    def eager(us: float):
        def time_eager(fn, calls):
            asked.append(calls)
            return us

        return time_eager

    monkeypatch.setattr(graph, "capture", _no_capture)
    for us, estimates, calls in ((5000.0, [1], 1), (5.0, [1, graph.ESTIMATE_CALLS], 200)):
        asked.clear()
        monkeypatch.setattr(graph, "time_eager", eager(us))
        with pytest.raises(_Captured) as captured:
            graph.calibrated_graph(lambda: None, 0.001)
        assert captured.value.args == (calls,) and asked == estimates


def _eager(us: float, enqueue_s: float = 0.0, hold_s: float = events.HOLD_S, calls: int = 2) -> events.EagerFigure:
    return events.EagerFigure(us, calls, enqueue_s, hold_s)


def test_quick_us_keeps_the_eager_figure_of_a_candidate_out_of_contest(monkeypatch) -> None:
    from deepbench.kernels.timing import graph_events

    monkeypatch.setattr(graph_events, "capture", _no_capture)
    monkeypatch.setattr(events, "can_hold", lambda: True)
    events_seen: list[str] = []

    def held(fn, calls):
        events_seen.append("timed")
        return _eager(500.0)

    monkeypatch.setattr(graph_events, "held_eager_figure", held)
    assert graph_events.quick_us(lambda: events_seen.append("call"), out_of_contest_us=300.0) == 500.0
    assert events_seen == ["call", "timed"]  # a first call, untimed, loads the candidate's kernels
    for contest in (600.0, float("inf")):  # within reach of the fastest: timed as the measurement times
        with pytest.raises(_Captured):
            graph_events.quick_us(lambda: None, out_of_contest_us=contest)
    # Under EAGER_EXACT_US an eager figure is launch-bound, not the call's: always captured.
    monkeypatch.setattr(graph_events, "held_eager_figure", lambda fn, calls: _eager(60.0))
    with pytest.raises(_Captured):
        graph_events.quick_us(lambda: None, out_of_contest_us=10.0)
    # A figure the host's launches made (enqueued after the hold ended) puts nothing out of contest.
    monkeypatch.setattr(graph_events, "held_eager_figure", lambda fn, calls: _eager(500.0, enqueue_s=1e-3))
    with pytest.raises(_Captured):
        graph_events.quick_us(lambda: None, out_of_contest_us=300.0)


def test_an_eager_figure_is_the_gpus_only_if_enqueued_within_the_hold(monkeypatch) -> None:
    monkeypatch.setattr(events, "can_hold", lambda: True)
    hold = events.HOLD_S
    assert _eager(50.0, enqueue_s=hold * events.HOLD_SHARE * 0.9).gpu_bound
    assert not _eager(50.0, enqueue_s=hold * events.HOLD_SHARE * 1.1).gpu_bound
    # A host slower than the hold whose launches took under HOST_SHARE of the figure: the GPU's still.
    span_s = 2 * 5000.0 / events.US_PER_S
    assert _eager(5000.0, enqueue_s=span_s * events.HOST_SHARE * 0.9).gpu_bound
    assert not _eager(5000.0, enqueue_s=span_s * events.HOST_SHARE * 1.1).gpu_bound
    monkeypatch.setattr(events, "can_hold", lambda: False)  # no spin kernel: no hold
    assert not _eager(50.0, enqueue_s=1e-5).gpu_bound  # 10% of the figure: the host may be in it


def test_a_slow_host_is_timed_again_behind_a_longer_hold(monkeypatch) -> None:
    monkeypatch.setattr(events, "can_hold", lambda: True)
    holds: list[float] = []

    def figure(fn, calls, during=None, hold_s=events.HOLD_S):
        holds.append(hold_s)
        return _eager(20.0 if hold_s > events.HOLD_S else 900.0, enqueue_s=2e-3, hold_s=hold_s)

    monkeypatch.setattr(events, "eager_figure", figure)
    pace = events.HostPace()
    held = events.held_eager_figure(lambda: None, 2, pace)
    assert holds == [events.HOLD_S, 2e-3 * events.HOLD_ROOM] and held.us_per_call == 20.0 and held.gpu_bound
    holds.clear()  # the next figure is held as long as the host's last pace asks: timed once
    assert events.held_eager_figure(lambda: None, 2, pace).gpu_bound
    assert holds == [2e-3 * events.PACE_ROOM]
    holds.clear()  # a host slower still: the hold stops at MAX_HOLD_S, and the figure says it is not the GPU's
    monkeypatch.setattr(
        events,
        "eager_figure",
        lambda fn, calls, during=None, hold_s=events.HOLD_S: (
            holds.append(hold_s) or _eager(900.0, enqueue_s=1.0, hold_s=hold_s)
        ),
    )
    assert not events.held_eager_figure(lambda: None, 2, events.HostPace()).gpu_bound
    assert holds[-1] == events.MAX_HOLD_S


def calm_at(mhz: float = 1980.0, share: float | None = 0.3, *reasons: str) -> ClockReading:
    return ClockReading(mhz, tuple(reasons), share)


def test_a_calm_reading_is_at_boost_with_no_reason_and_power_well_under_its_limit() -> None:
    assert settling.calm(calm_at(), 1980.0)
    assert not settling.calm(calm_at(share=settling.CALM_POWER_SHARE), 1980.0)  # near the limit: heavy
    assert not settling.calm(calm_at(share=None), 1980.0)  # no instantaneous power: cannot say
    assert not settling.calm(calm_at(1700.0), 1980.0)  # below boost
    assert not settling.calm(calm_at(1980.0, 0.3, "sw_power_cap"), 1980.0)
    assert not settling.calm(ClockReading(1980.0, None, 0.3), 1980.0)  # reasons unknown
    assert not settling.calm(calm_at(), 0.0)  # no reference clock yet


def test_the_clock_reader_gives_the_power_share_from_the_instantaneous_field_only() -> None:
    from deepbench.kernels.timing.clocks import ClockReader

    from .fake_nvml import FakeNvml, FakeTime

    reading = ClockReader.of(FakeNvml(FakeTime(), watts=210.0, reasons=0), "handle-0").reading()
    assert reading.mhz == 1980.0 and reading.reasons == () and reading.power_share == pytest.approx(0.3)
    averaged_only = ClockReader.of(FakeNvml(FakeTime(), watts=210.0, instant=False), "handle-0")
    assert averaged_only.reading().power_share is None  # the 1 s average lags a new load: not used
    assert ClockReader.of(None, None).reading() == ClockReading()


def _sampled(readings: list[ClockReading], values: list[float], rule: StopRule) -> clocked.Sampling:
    """run_samples over a series of 1 ms samples and their readings."""
    ticks, series, clocks = itertools.count(1), iter(values), iter(readings)
    sampler = Sampler("fake", 1, take=lambda: next(series))
    return clocked.run_samples(
        sampler,
        rule,
        lambda: next(clocks),
        now=lambda: next(ticks) * 0.001,
        reference=lambda: 1980.0,
        rest=lambda s: None,
    )


DEFAULT_RULE = StopRule(0.01, 5, 1000, 1.0, min_time_s=0.2, limited_min_time_s=1.0, calm_min_time_s=0.02)


def test_a_calm_light_kernel_converges_in_a_tenth_of_the_samples() -> None:
    tight = [20.0 + 0.001 * (i % 5) for i in range(1000)]
    calm = _sampled([calm_at()] * 1000, tight, DEFAULT_RULE)
    assert calm.reason == CONVERGED and calm.calm and len(calm.samples) <= 25
    unread = _sampled([ClockReading(1980.0, (), None)] * 1000, tight, DEFAULT_RULE)  # no power figure
    assert unread.reason == CONVERGED and not unread.calm and len(unread.samples) >= 199


def test_a_heavy_kernel_keeps_the_whole_floor_and_the_settling_it_protects() -> None:
    """Near its power limit a kernel is not calm: the whole 0.2 s, and where the limiter then pulls the clock
    down, the samples before are left out and the limited floor (1 s) counts from the move."""
    tight = [50.0] * 3000
    heavy = _sampled([calm_at(share=0.9)] * 3000, tight, DEFAULT_RULE)
    assert heavy.reason == CONVERGED and not heavy.calm and len(heavy.samples) >= 199
    readings = [calm_at(share=0.9)] * 30 + [calm_at(1600.0, 1.0, "sw_power_cap")] * 3000
    limited = _sampled(readings, tight, StopRule(0.01, 5, 5000, 2.0, 0.2, 1.0, 0.02))
    # the sample the moved reading was taken in is left out too: the stretch begins after it
    assert limited.settle_samples == 31 and limited.reason == CONVERGED and len(limited.samples) >= 999


def test_a_noisy_calm_kernel_still_runs_to_the_time_cap() -> None:
    noisy = [float(v) for v in itertools.islice(itertools.cycle([10.0, 30.0, 20.0, 50.0]), 3000)]
    got = _sampled([calm_at()] * 3000, noisy, StopRule(1e-4, 5, 5000, 1.0, 0.2, 1.0, 0.02))
    assert got.reason == TIME_CAP and got.calm
