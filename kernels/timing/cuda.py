"""GPU timing shared by every CUDA operation: graph batches timed by events (hot), flushed-L2
calls timed by events (cold), and an eager events fallback.

Why graphs: an eager Python loop cannot launch faster than ~10 us a call and one event pair
around a single launch adds ~3 us, so a 5 us GEMM would read 8-10 us. A CUDA graph of `calls`
unrolled calls, replayed between two events, launches them back to back from the device and
lands within a fraction of a microsecond of the kernels' own durations (nvbench's hot
measurement). Calibration picks `calls` so one replay lasts at least `min_sample_s`.

Cold (`Settings.cold`): before every call a buffer twice the L2's size is written, so the call
finds none of its operands in L2 (triton.testing.do_bench's flush); each call is timed by its own
event pair, which adds the ~2-3 us an event pair costs: cold figures suit large kernels.

Throttling: the SM clock is read (NVML, optional) during every sample: after the host has
enqueued it and before it waits for it, so the reading is taken while the GPU runs the sample
(a reading after the wait would see an idle GPU's clock recovering). Samples taken below
`THROTTLE_FRACTION` of the highest clock this process has seen are discarded, as long as at
least the rule's minimum of samples remains; otherwise all are kept and counted as throttled.
A clock read is a point reading, not an average over the sample.

Profiler cross-check (`Settings.verify_timing`): CUPTI (through torch.profiler) records the
kernels of one more sample, replayed exactly as timed (the same graph), so the harness's figure
and the kernels' own durations describe the same executions.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..results import Measurement, Settings
from .stopping import MAX_SAMPLES, TIME_CAP, StopRule

METHOD_GRAPH = "cuda-graph-events"
METHOD_COLD = "cuda-events-cold"
METHOD_EAGER = "cuda-events-eager"

MAX_CALLS_PER_GRAPH = 2000   # bounds capture time and graph memory for tiny kernels
MAX_CALLS_EAGER = 1 << 14
COLD_CALLS_PER_SYNC = 16     # event pairs recorded before one host synchronisation
FLUSH_FACTOR = 2             # flush buffer = this x L2 size
# A sample below 75% of the highest SM clock seen is throttled (nvbench's --throttle-threshold
# default). A tighter threshold (we had 90%) treats the power limiter's ordinary 5-10% dips under
# a large GEMM as throttling: the rests that follow cool the chip, the figure becomes a burst
# figure that depends on what ran before, and a second run disagrees by up to 20% (H200).
THROTTLE_FRACTION = 0.75
RECOVERY_S = 0.05            # rest after a throttled sample (nvbench's throttle_recovery_delay)
PROFILE_MAX_CALLS = 200     # at most this many calls of a sample are profiled (--verify-timing)
VERIFY_TOLERANCE = 0.05      # flag harness/profiler disagreement beyond 5%
MS_TO_US = 1e3
# Before each timed sample a spin kernel of this length runs (torch.cuda._sleep): the start
# event then fires only after the host has submitted the whole sample (cudaGraphLaunch of a
# long graph takes tens of microseconds of host time, which an idle GPU would otherwise count),
# and the SM clock is up rather than ramping from idle. nvbench holds the stream the same way.
HOLD_S = 200e-6
HOLD_CLOCK_HZ = 2.0e9  # cycles per second assumed when sizing the spin (it only has to be long enough)


class ClockReader:
    """SM clock and throttle reasons through NVML (nvidia-ml-py), if it is installed."""

    def __init__(self, device: torch.device) -> None:
        self.handle: Any = None
        self.nvml: Any = None
        self.max_seen = 0.0
        try:
            import pynvml  # optional: nvidia-ml-py

            pynvml.nvmlInit()
            props = torch.cuda.get_device_properties(device)
            uuid = getattr(props, "uuid", None)
            handle = None
            if uuid is not None:
                try:
                    handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
                except pynvml.NVMLError:
                    handle = None
            self.handle = handle or pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            self.nvml = pynvml
        except Exception:  # noqa: BLE001 - clocks are optional; no NVML means no clock figures
            self.handle = None

    @property
    def available(self) -> bool:
        return self.handle is not None

    def sm_mhz(self) -> float | None:
        if not self.available:
            return None
        try:
            mhz = float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        except Exception:  # noqa: BLE001
            return None
        self.max_seen = max(self.max_seen, mhz)
        return mhz

    def throttle_reasons(self) -> list[str]:
        """Names of active thermal/power slowdown reasons (idle and app-clock settings excluded)."""
        if not self.available:
            return []
        n = self.nvml
        try:
            fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
            mask = int(fn(self.handle))
        except Exception:  # noqa: BLE001
            return []
        names = {"sw_power_cap": 0x4, "hw_slowdown": 0x8, "sync_boost": 0x10, "sw_thermal": 0x20,
                 "hw_thermal": 0x40, "hw_power_brake": 0x80}
        return [name for name, bit in names.items() if mask & bit]

    def max_clocks(self) -> dict[str, float]:
        if not self.available:
            return {}
        n = self.nvml
        out = {}
        for key, clock in (("sm_max_mhz", n.NVML_CLOCK_SM), ("mem_max_mhz", n.NVML_CLOCK_MEM)):
            try:
                out[key] = float(n.nvmlDeviceGetMaxClockInfo(self.handle, clock))
            except Exception:  # noqa: BLE001
                pass
        return out


def _no_probe() -> None:
    """Default for `during`: nothing to read while a sample runs."""


@dataclass
class Sampler:
    """Turns one way of timing into samples (us per call) for the shared stopping loop.

    `replay` enqueues the work of one sample untimed (`replay_calls` calls of the timed
    function), so the profiler can record exactly what was timed."""

    method: str
    calls: int
    take: Callable[[], float]
    warmup_calls: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    replay: Callable[[], None] | None = None
    replay_calls: int = 0
    before_replay: Callable[[], None] = _no_probe  # e.g. the cold measurement's L2 flush, not profiled


def _events() -> tuple[torch.cuda.Event, torch.cuda.Event]:
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def hold_stream() -> None:
    """Keep the stream busy while the host enqueues the sample (see HOLD_S)."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int(HOLD_S * HOLD_CLOCK_HZ))


def time_eager(fn: Callable[[], object], calls: int, during: Callable[[], None] = _no_probe) -> float:
    """Microseconds per call of `calls` back-to-back eager calls between two events."""
    start, end = _events()
    hold_stream()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    during()
    end.synchronize()
    return start.elapsed_time(end) * MS_TO_US / calls


def calls_for(per_call_us: float, min_sample_s: float, cap: int) -> int:
    """Calls that make one sample last at least `min_sample_s` (at least 1, at most `cap`)."""
    per_call_us = max(per_call_us, 1e-3)
    return max(1, min(cap, math.ceil(min_sample_s * 1e6 / per_call_us)))


def capture(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    """A graph of `calls` unrolled calls. PyTorch captures on a side stream; one eager call on
    that stream first lets libraries create their per-stream handles and workspaces."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return graph


def graph_sampler(fn: Callable[[], object], min_sample_s: float, during: Callable[[], None] = _no_probe) -> Sampler:
    """Calibrate from eager event timing, capture, and re-capture once if a replay is short."""
    estimate = time_eager(fn, 3)
    calls = calls_for(estimate, min_sample_s, MAX_CALLS_PER_GRAPH)
    graph = capture(fn, calls)
    start, end = _events()

    def replay_us(g: torch.cuda.CUDAGraph, n: int) -> float:
        hold_stream()
        start.record()
        g.replay()
        end.record()
        during()
        end.synchronize()
        return start.elapsed_time(end) * MS_TO_US / n

    per_call = replay_us(graph, calls)
    warmup = 4 + 2 * calls
    better = calls_for(per_call, min_sample_s, MAX_CALLS_PER_GRAPH)
    if better > calls * 1.5:  # the eager estimate was launch-bound: the graph runs faster
        del graph
        calls = better
        graph = capture(fn, calls)
        replay_us(graph, calls)
        warmup += 2 * calls
    warmup += calls
    return Sampler(METHOD_GRAPH, calls, lambda: replay_us(graph, calls), warmup, replay=graph.replay,
                   replay_calls=calls)


def _eager_replay(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    def replay() -> None:
        for _ in range(calls):
            fn()
    return replay


def eager_sampler(fn: Callable[[], object], min_sample_s: float, reason: str,
                  during: Callable[[], None] = _no_probe) -> Sampler:
    per_call = time_eager(fn, 2)
    calls = calls_for(per_call, min_sample_s, MAX_CALLS_EAGER)
    shown = min(calls, PROFILE_MAX_CALLS)
    return Sampler(METHOD_EAGER, calls, lambda: time_eager(fn, calls, during), 2, {"eager_reason": reason},
                   replay=_eager_replay(fn, shown), replay_calls=shown)


def cold_sampler(fn: Callable[[], object], device: torch.device, during: Callable[[], None] = _no_probe) -> Sampler:
    """One call per sample, each after writing a buffer larger than L2."""
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20)
    flush = torch.empty(FLUSH_FACTOR * l2 // 4, dtype=torch.float32, device=device)
    pending: list[float] = []

    def take() -> float:
        if not pending:
            pairs = [_events() for _ in range(COLD_CALLS_PER_SYNC)]
            for start, end in pairs:
                flush.fill_(1.0)
                start.record()
                fn()
                end.record()
            during()
            pairs[-1][1].synchronize()
            pending.extend(s.elapsed_time(e) * MS_TO_US for s, e in pairs)
        return pending.pop(0)

    fn()
    return Sampler(METHOD_COLD, 1, take, 1, {"flush_bytes": flush.numel() * 4}, replay=fn, replay_calls=1,
                   before_replay=lambda: flush.fill_(1.0))


def sampler_for(fn: Callable[[], object], settings: Settings, capturable: bool, device: torch.device,
                during: Callable[[], None] = _no_probe) -> Sampler:
    if settings.cold:
        return cold_sampler(fn, device, during)
    if not capturable:
        return eager_sampler(fn, settings.min_sample_s, "work cannot be captured in a CUDA graph", during)
    try:
        return graph_sampler(fn, settings.min_sample_s, during)
    except Exception as exc:  # noqa: BLE001 - capture refused (host sync, unsupported op): time eagerly
        torch.cuda.synchronize()
        return eager_sampler(fn, settings.min_sample_s, f"graph capture failed: {type(exc).__name__}: {exc}"[:300],
                             during)


def select_unthrottled(samples: list[float], clocks: list[float | None], reference_mhz: float, min_keep: int
                       ) -> tuple[list[float], list[float], int, int]:
    """(kept samples, their clocks, discarded, throttled-but-kept). Samples whose clock is below
    THROTTLE_FRACTION of `reference_mhz` are dropped if at least `min_keep` remain."""
    if reference_mhz <= 0 or not any(c is not None for c in clocks):
        return samples, [c for c in clocks if c is not None], 0, 0
    low = [c is not None and c < THROTTLE_FRACTION * reference_mhz for c in clocks]
    n_low = sum(low)
    if n_low == 0:
        return samples, [c for c in clocks if c is not None], 0, 0
    if len(samples) - n_low >= min_keep:
        kept = [(s, c) for s, c, lo in zip(samples, clocks, low) if not lo]
        return [s for s, _ in kept], [c for _, c in kept if c is not None], n_low, 0
    return samples, [c for c in clocks if c is not None], 0, n_low


def run_samples(sampler: Sampler, rule: StopRule, clock: Callable[[], float | None],
                now: Callable[[], float] = time.perf_counter, reference: Callable[[], float] = lambda: 0.0,
                rest: Callable[[float], None] = time.sleep) -> tuple[list[float], list[float | None], str]:
    """Take samples until the rule stops; returns samples, clock per sample and the reason.

    nvbench's throttle handling: a sample whose SM clock is below THROTTLE_FRACTION of
    `reference()` (the highest clock seen) is not shown to the stopping rule, and the GPU rests
    RECOVERY_S before the next sample, so a power- or heat-capped stretch does not decide the
    figure. Such samples are still returned (select_unthrottled drops them afterwards); past
    twice the time cap the loop stops whatever the clocks say, and the result says throttled."""
    samples: list[float] = []
    clocks: list[float | None] = []
    counted: list[float] = []
    start = now()
    while True:
        samples.append(sampler.take())
        mhz = clock()
        clocks.append(mhz)
        ref = reference()
        throttled = mhz is not None and ref > 0 and mhz < THROTTLE_FRACTION * ref
        if not throttled:
            counted.append(samples[-1])
        elapsed = now() - start
        reason = rule.decide(counted, elapsed) if counted else None
        if reason:
            return samples, clocks, reason
        if elapsed >= 2 * rule.time_cap_s or len(samples) >= rule.max_samples:
            return samples, clocks, MAX_SAMPLES if len(samples) >= rule.max_samples else TIME_CAP
        if throttled:
            rest(RECOVERY_S)


def measure(fn: Callable[[], object], rule: StopRule, settings: Settings, capturable: bool,
            device: torch.device, clocks: ClockReader) -> tuple[Measurement, dict[str, Any]]:
    """Time `fn` on the GPU; returns the measurement and notes for the part's info (with the
    profiler's figures beside it when `settings.verify_timing`)."""
    reading: list[float | None] = [None]

    def during() -> None:
        reading[0] = clocks.sm_mhz()

    sampler = sampler_for(fn, settings, capturable, device, during)
    samples, readings, reason = run_samples(sampler, rule, lambda: reading[0], reference=lambda: clocks.max_seen)
    kept, kept_clocks, discarded, throttled = select_unthrottled(samples, readings, clocks.max_seen, rule.min_samples)
    notes = dict(sampler.notes)
    active = clocks.throttle_reasons()
    if active:
        notes["nvml_clock_event_reasons"] = active
    if throttled:
        notes["throttled_samples_kept"] = throttled
    if clocks.max_seen:
        notes["sm_clock_reference_mhz"] = clocks.max_seen
    m = Measurement.of(kept, method=sampler.method, calls_per_sample=sampler.calls, warmup_calls=sampler.warmup_calls,
                       stop_reason=reason, target_rel_precision=rule.target_rel_precision, discarded=discarded,
                       clocks_mhz=tuple(kept_clocks))
    if settings.verify_timing and sampler.replay is not None:
        notes["profiler"] = verify(sampler, m.stats.median)
    return m, notes


def kernel_spans(intervals: list[tuple[float, float]], per_call: int) -> list[float]:
    """Per-call spans (first kernel's start to last kernel's end, us) of `per_call` kernels a call."""
    if per_call < 1:
        return []
    return [intervals[i + per_call - 1][1] - intervals[i][0]
            for i in range(0, len(intervals) - per_call + 1, per_call)]


def profile_replay(replay: Callable[[], None], calls: int, before: Callable[[], None] = _no_probe) -> dict[str, Any]:
    """What CUPTI (through torch.profiler) records of one replay of `calls` calls: per call, the
    kernels' summed durations (busy), the span from a call's first kernel start to its last
    kernel end (which adds the gaps between the kernels of one call, e.g. split-K's reduction),
    and the period (the replay's first start to last end, over calls: adds the gaps between calls),
    with the kernel names. Memsets and copies the call makes count as its kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    replay()
    before()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        replay()
        torch.cuda.synchronize()
    events = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                    if e.device_type == DeviceType.CUDA)
    if not events:
        return {"kernel_us": math.nan, "kernels_per_call": 0.0, "kernel_names": [], "calls": calls}
    intervals = [(a, b) for a, b, _ in events]
    per_call = len(events) // calls if len(events) % calls == 0 else 0
    spans = kernel_spans(intervals, per_call)
    names: dict[str, int] = {}
    for _, _, name in events:
        names[name] = names.get(name, 0) + 1
    top = sorted(names.items(), key=lambda kv: -kv[1])[:3]
    return {"kernel_us": sum(b - a for a, b in intervals) / calls,
            "span_us": statistics.median(spans) if spans else None,
            "period_us": (intervals[-1][1] - intervals[0][0]) / calls,
            "kernels_per_call": len(events) / calls, "kernel_names": [n[:120] for n, _ in top], "calls": calls}


def profiler_kernel_us(fn: Callable[[], object], calls: int = 1) -> dict[str, Any]:
    """The profiler's figures (profile_replay) for `calls` eager calls of `fn`."""
    return profile_replay(_eager_replay(fn, calls), calls)


def verify(sampler: Sampler, harness_us: float) -> dict[str, Any]:
    """The profiler's kernel time of one more sample beside the harness time, flagged when they
    part by more than VERIFY_TOLERANCE."""
    assert sampler.replay is not None
    prof = profile_replay(sampler.replay, sampler.replay_calls, sampler.before_replay)
    ratio = harness_us / prof["kernel_us"] if prof["kernel_us"] > 0 else math.inf
    return {**prof, "harness_us": harness_us, "ratio": ratio, "agrees": abs(ratio - 1.0) <= VERIFY_TOLERANCE}
