"""The one sampling loop (timing/sampling.py) with fake sources, and the timers that use it: the
CPU timer, the GPU timer's clocked samples and the collective's rank-synchronised samples."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from deepbench.kernels.backends.collectives.common import CollectiveRunner, Communicator
from deepbench.kernels.results import Settings
from deepbench.kernels.timing import cpu
from deepbench.kernels.timing.clocked import run_samples
from deepbench.kernels.timing.sampler import Sampler
from deepbench.kernels.timing.sampling import Step, sample_until
from deepbench.kernels.timing.settling import ClockReading
from deepbench.kernels.timing.stopping import (
    CONVERGED,
    MAX_SAMPLES,
    REPEAT_COUNT,
    TIME_CAP,
    MinSamples,
    MinTime,
    NoiseBelow,
    Progress,
    Stop,
    StopRule,
)


class FakeSource:
    """Samples from a series, one tick of a fake clock each; counts pauses."""

    def __init__(self, values: Iterator[float], judged_from: int = 0) -> None:
        self.values, self.judged_from = values, judged_from
        self.samples: list[float] = []
        self.pauses = 0

    def take(self) -> Step:
        self.samples.append(next(self.values))
        elapsed = float(len(self.samples))
        judged = self.samples[self.judged_from :]
        return Step(Progress(judged, elapsed) if judged else None, Progress(self.samples, elapsed))

    def pause(self) -> None:
        self.pauses += 1


def test_several_criteria_combined_stop_when_all_of_one_hold() -> None:
    # steady from the start, but the noise criterion also needs 4 samples and 6 s (one sample a second)
    rule = (Stop(CONVERGED, MinSamples(4), MinTime(6.0), NoiseBelow(0.01)),)
    source = FakeSource(itertools.repeat(5.0))
    assert sample_until(source, rule) == CONVERGED
    assert len(source.samples) == 6 and source.pauses == 5  # a pause between samples, none after the last


def test_the_time_cap_stops_a_noisy_sequence_that_never_settles() -> None:
    rule = StopRule(target_rel_precision=0.01, min_samples=3, max_samples=10_000, time_cap_s=8.0)
    source = FakeSource(itertools.cycle([1.0, 9.0, 2.0, 8.0]))
    assert sample_until(source, rule.criteria, rule.hard_limits) == TIME_CAP
    assert len(source.samples) == 8  # one sample a second: the cap at 8 s


def test_the_sample_cap_comes_before_the_time_cap() -> None:
    rule = StopRule(target_rel_precision=0.01, min_samples=3, max_samples=5, time_cap_s=5.0)
    source = FakeSource(itertools.cycle([1.0, 9.0]))
    assert sample_until(source, rule.criteria, rule.hard_limits) == MAX_SAMPLES and len(source.samples) == 5


def test_limits_stop_while_the_rule_has_nothing_to_judge() -> None:
    # every sample is withheld from the rule (say, throttled): only the limits on all samples can stop
    rule = StopRule(target_rel_precision=0.01, min_samples=1, max_samples=1000, time_cap_s=3.0)
    source = FakeSource(itertools.repeat(5.0), judged_from=10**9)
    assert sample_until(source, rule.criteria, rule.hard_limits) == TIME_CAP and len(source.samples) == 6


def test_the_rule_is_asked_before_the_limits() -> None:
    rule = (Stop(CONVERGED, MinSamples(3)),)
    limits = (Stop(REPEAT_COUNT, MinSamples(3)),)
    assert sample_until(FakeSource(itertools.repeat(1.0)), rule, limits) == CONVERGED
    assert sample_until(FakeSource(itertools.repeat(1.0)), (), limits) == REPEAT_COUNT


def test_the_gpu_loop_never_settles_on_noise_and_stops_at_the_time_cap() -> None:
    """Noisy samples at a steady clock: the rule's own time cap (min_samples reached) stops it."""
    values = itertools.cycle([3.0, 7.0, 4.0, 9.0, 5.0])
    ticks = itertools.count()
    rule = StopRule(target_rel_precision=1e-3, min_samples=3, max_samples=10_000, time_cap_s=20.0)
    got = run_samples(
        Sampler("fake", 1, take=lambda: next(values)),
        rule,
        lambda: ClockReading(1980.0, ()),
        now=lambda: float(next(ticks)),
        reference=lambda: 1980.0,
        rest=lambda s: None,
    )
    assert got.reason == TIME_CAP and len(got.samples) == 20  # one tick a sample: the cap at 20 s


def test_cpu_timer_stops_by_the_shared_rule(monkeypatch) -> None:
    """A fake clock of 1 s a sample: the time cap of a never-converging series is reached on time,
    counted from the calibration's last loop, which is the first sample (1 s before the loop starts)."""
    seconds = itertools.cycle([1.0, 3.0, 2.0, 5.0])
    clock = itertools.count()
    monkeypatch.setattr(cpu, "_time_calls", lambda fn, calls: next(seconds))
    monkeypatch.setattr(cpu.time, "perf_counter", lambda: float(next(clock)))
    rule = StopRule(target_rel_precision=1e-6, min_samples=3, max_samples=1000, time_cap_s=6.0)
    m = cpu.measure(lambda: None, rule, min_sample_s=0.5)
    assert m.stop_reason == TIME_CAP and m.calls_per_sample == 1 and m.warmup_calls == 0
    assert m.stats.n == 5  # 6 s after the calibration loop began: it and four more samples


class TwoRanks(Communicator):
    """Rank 0 of a fake world of two: the other rank's times come from `other_us` (per sample) and
    are slower than this rank's, so they make the samples."""

    library = "fake"
    size = 2

    def __init__(self, other_us: Iterator[float]) -> None:
        self.other_us = other_us

    def allgather(self, values: list[float]) -> list[list[float]]:
        if len(values) == 1:  # calibration: the other rank's loop lasted a whole second
            return [values, [1.0]]
        return [values, [next(self.other_us), values[1]]]

    def buffer(self, values: np.ndarray) -> Any:
        return values

    def empty(self, floats: int) -> Any:
        return np.zeros(floats, dtype=np.float32)

    def all_reduce_in_place(self, buf: Any) -> None:
        pass

    def all_reduce(self, send: Any, recv: Any) -> None:
        pass

    def copy(self, dst: Any, src: Any) -> None:
        pass

    def to_host(self, buf: Any) -> np.ndarray:
        return buf

    def synchronize(self) -> None:
        pass

    def barrier(self) -> None:
        pass


def _collective(other_us: Iterator[float], rule: StopRule, max_calls: int) -> tuple[Any, dict[str, Any]]:
    runner = CollectiveRunner(TwoRanks(other_us), Settings(min_sample_s=0.001, min_samples=3))
    info: dict[str, Any] = {"bytes": 4.0e6, "bus_factor": 1.0}
    return runner.measure(lambda: None, rule, max_calls, info), info


def test_the_collective_stops_at_its_repeat_count_when_noisy() -> None:
    rule = StopRule(target_rel_precision=1e-6, min_samples=3, max_samples=1000, time_cap_s=1e6)
    m, info = _collective(itertools.cycle([1e6, 3e6]), rule, max_calls=7)
    assert m.stop_reason == REPEAT_COUNT and m.stats.n == 7 and info["timed_calls"] == 7
    assert m.calls_per_sample == 1 and m.warmup_calls == 0 and info["repeat_cap"] == 7


def test_the_collective_converges_on_the_slowest_ranks_steady_time() -> None:
    rule = StopRule(target_rel_precision=0.01, min_samples=3, max_samples=1000, time_cap_s=1e6)
    m, info = _collective(itertools.repeat(2e6), rule, max_calls=100)
    assert m.stop_reason == CONVERGED and m.stats.n == 3 and m.stats.median == 2e6
    assert info["time_max_over_ranks_us"] == 2e6 and len(info["time_per_rank_us"]) == 2


class MirroredRanks(TwoRanks):
    """Two ranks that time alike; counts the start lines (one-float all-reduces) made before samples."""

    def __init__(self) -> None:
        super().__init__(iter(()))
        self.start_lines = 0

    def allgather(self, values: list[float]) -> list[list[float]]:
        return [values, values]

    def all_reduce_in_place(self, buf: Any) -> None:
        self.start_lines += 1


class FakeGraphs:
    """A graph timer whose replays take 100 us a call, calling the start line as GraphTimer does."""

    method = "fake-graph"
    min_sample_s = 0.02

    def timed(self, fn: Any, calls: int, barrier: Any, start_line: Any) -> float:
        barrier()
        start_line()
        return calls * 1e-4


def test_graph_replayed_collectives_take_long_samples_after_a_start_line() -> None:
    """A graph-timed collective's samples last the graph timer's floor (20 ms: back-to-back NCCL calls
    overlap as in nccl-tests' 100-call launches) or Settings.min_sample_s where longer, and every
    sample starts with a start line on the device."""
    comm = MirroredRanks()
    runner = CollectiveRunner(comm, Settings(min_sample_s=0.001, min_samples=3))
    runner.graphs = FakeGraphs()
    calls, made, _ = runner._calibrate(lambda: None, max_calls=10**6)
    assert calls == 201 and made == 1 + 201 and comm.start_lines == 2  # 201 x 100 us >= 20 ms
    runner.settings = Settings(min_sample_s=0.05, min_samples=3)  # --min-sample longer than the floor
    assert runner._calibrate(lambda: None, max_calls=10**6)[0] == 501
