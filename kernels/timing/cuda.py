"""GPU timing shared by every CUDA operation: graph batches timed by events (hot), flushed-L2
calls timed by events (cold), and an eager events fallback.

Why graphs: an eager Python loop cannot launch faster than ~10 us a call and one event pair
around a single launch adds ~3 us, so a 5 us GEMM would read 8-10 us. A CUDA graph of `calls`
unrolled calls, replayed between two events, launches them back to back from the device and
lands within a fraction of a microsecond of the kernels' own durations (nvbench's hot
measurement). Calibration picks `calls` so one replay lasts at least `min_sample_s`. Samples
follow each other on the GPU without a gap (BackToBack), as in a native loop.

Kernel time (`Settings.kernel_time`, the default; --no-kernel-time turns it off): calls under
KERNEL_TIMED_BELOW_US are timed by CUPTI (KernelTimes, method `cuda-graph-cupti`): the same
replays, but each call's time is its kernels' own span on the GPU's clock. Between two dependent
kernels the GPU leaves 0.1-0.3 us (H100), which the events count, as a native loop of
back-to-back calls does: several percent of a 3-5 us GEMM, whose truth is the kernel's own
duration (DESIGN.md). The events' figure stays beside it in the notes. What CUPTI costs (H100,
torch 2.11): replays run ~3% slower while it records (events over a C++ graph loop of the same
GEMMs, median 1.031), and once started it stays attached to the process (cupti.py) and slows
the host's launches: eager timings of launch-bound cuDNN RNN backwards read a geomean 1.31x and
1.27x after one recording, the same backwards replayed from a graph 1.001x and 1.008x
(tests/benchmarks/cupti_linger.py). Graph replays do not wait on the host, and every GPU
operation is captured (the RNN backward too), so only timings that count host launches are
exposed: an eager fallback after a failed capture and --cold, whose notes then say
`cupti_attached`. CUPTI's first start (2-5 s) runs during the device warm-up.

Cold (`Settings.cold`): before every call a buffer twice the L2's size is written, so the call
finds none of its operands in L2 (triton.testing.do_bench's flush); each call is timed by its own
event pair, which adds the ~2-3 us an event pair costs: cold figures suit large kernels.

Clocks: the SM clock and NVML's slowdown reasons are read (NVML, optional) during every sample:
after the host has enqueued it and before it waits for it, so the reading is taken while the GPU
runs the sample (a reading after the wait would see an idle GPU's clock recovering). A clock
read is a point reading, not an average over the sample. Which samples count as throttled, and
where the steady stretch begins once the power limiter has moved the clock, is decided in
settling.py: throttled samples are discarded as long as at least the rule's minimum of samples
remains (otherwise all are kept and counted as throttled); samples before the clock's first
move are left out, and the stopping rule's minimum measuring time (runner/run.py MODES: 0.2 s by
default, 1 s while the power limiter holds the clock; tests/benchmarks/settle_rules.py shows the
choice on recorded series) counts from it.

Profiler cross-check (`Settings.verify_timing`): right after the measurement, CUPTI (through
torch.profiler) records a few more samples taken exactly as the timed ones (the same graph, the
same event pairs, the GPU kept busy while the profiler starts). Its kernel durations stand beside
the harness's figure (`ratio`), and beside the events of those very samples (`timer_ratio`).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..results import Measurement, Settings
from . import cupti
from .settling import ClockReading, SettleWatch, power_limited, stretch_limited, throttled
from .stopping import MAX_SAMPLES, TIME_CAP, StopRule

METHOD_GRAPH = "cuda-graph-events"
METHOD_KERNELS = "cuda-graph-cupti"
METHOD_COLD = "cuda-events-cold"
METHOD_EAGER = "cuda-events-eager"

MAX_CALLS_PER_GRAPH = 2000   # bounds capture time and graph memory for tiny kernels
MAX_CALLS_EAGER = 1 << 14
COLD_CALLS_PER_SYNC = 16     # event pairs recorded before one host synchronisation
FLUSH_FACTOR = 2             # flush buffer = this x L2 size
RECOVERY_S = 0.05            # rest after a throttled sample (nvbench's throttle_recovery_delay)
EAGER_PROFILED_CALLS = 200  # an eager sample's calls profiled at once (--verify-timing)
VERIFY_TOLERANCE = 0.05      # flag harness/profiler disagreement beyond 5%
MS_TO_US = 1e3
# Before a sample that finds the GPU idle (the first of a measurement, an eager or calibration
# sample) a spin kernel of this length runs (torch.cuda._sleep): the start event then fires only
# after the host has submitted the whole sample (cudaGraphLaunch of a long graph takes tens of
# microseconds of host time, which an idle GPU would otherwise count). nvbench holds the stream
# the same way. Later graph samples wait behind the previous one instead (BackToBack).
HOLD_S = 200e-6
HOLD_CLOCK_HZ = 2.0e9  # cycles per second assumed when sizing the spin (it only has to be long enough)
# Calls shorter than this (per call, as a graph replay timed by events) are timed by CUPTI
# (KernelTimes): the GPU leaves 0.1-0.3 us between two dependent kernels (H100, up to 0.7 us
# after a 10 us GEMM), which an event timer counts: 3-10% of a 3-5 us GEMM, under 3% from here on.
KERNEL_TIMED_BELOW_US = 20.0
KERNEL_BATCH_S = 0.05   # GPU time a KernelTimes batch records at most: the host reads it while replays run on
BATCH_RECORDS = 4000    # kernel records a batch holds at most (the host takes ~10 us a record, H100 machine)
KERNEL_SAMPLE_S = 100e-6  # GPU time of one CUPTI-timed sample (a replay's chunk of calls)
PROBE_REPLAYS = 4       # replays in KernelTimes' first batch, which shows whether CUPTI can time the calls
# GPU time of replays run before KernelTimes' first batch. A short call's kernels keep speeding up
# for a while after its first calls: fp16/bf16 7680x{32,64}x2560 NN GEMMs (A: 39 MB, the L2: 50 MB)
# ran 1.5-2.5% faster at the end of a 0.04 s measurement than at its start and read
# 1.050-1.069 of the profiler's samples taken after 0.1 s more of replays (H100, at 1980 MHz).
KERNEL_WARM_S = 0.1
# Candidates (cuDNN engines) are first compared by QUICK_SAMPLES replays of QUICK_SAMPLE_S each,
# after one untimed; the close ones are timed again with more (backends/engine_choice.py).
QUICK_SAMPLE_S = 0.001
QUICK_SAMPLES = 1
HOST_S_GUESS = 0.003    # host time between two batches (a recording's start and stop), until one is measured
MAX_RECORDED_CALLS = 20_000  # calls whose records --verify-timing reads at once
# --verify-timing: replays kept running while the profiler starts (see profile_samples).
PROFILE_WARM_S = 0.1
MAX_WARM_REPLAYS = 1000
# How much is profiled: samples covering as long as the timed ones did, so the power limiter's
# swing (+-5% between 100 ms windows, H100) averages out as in the timed figure (20 ms windows
# left 6 large GEMMs 5-6% off their harness time), at most this many samples (and MAX_RECORDED_CALLS).
PROFILE_MAX_SAMPLES = 1000
# NVML's clock event reason bits that slow the SM clock (idle and application-clock settings left out)
SLOWDOWN_REASONS = {"sw_power_cap": 0x4, "hw_slowdown": 0x8, "sync_boost": 0x10, "sw_thermal": 0x20,
                    "hw_thermal": 0x40, "hw_power_brake": 0x80}


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

    def throttle_reasons(self) -> list[str] | None:
        """Names of active thermal/power slowdown reasons (idle and app-clock settings excluded);
        None where NVML cannot say."""
        if not self.available:
            return None
        n = self.nvml
        try:
            fn = (getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                  or n.nvmlDeviceGetCurrentClocksThrottleReasons)
            mask = int(fn(self.handle))
        except Exception:  # noqa: BLE001
            return None
        return [name for name, bit in SLOWDOWN_REASONS.items() if mask & bit]

    def reading(self) -> ClockReading:
        """The SM clock and the slowdown reasons now (taken while a sample runs)."""
        reasons = self.throttle_reasons()
        return ClockReading(self.sm_mhz(), None if reasons is None else tuple(reasons))

    def temperature_c(self) -> float | None:
        if not self.available:
            return None
        try:
            return float(self.nvml.nvmlDeviceGetTemperature(self.handle, self.nvml.NVML_TEMPERATURE_GPU))
        except Exception:  # noqa: BLE001
            return None

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


def enqueue_marked(pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]], replay: Callable[[], None],
                   before: Callable[[], None] = _no_probe) -> None:
    """Samples for a CUPTI recording, one per event pair: the marker kernel that opens a sample in
    the record, `before` (untimed, e.g. the cold measurement's flush), then the replay between the
    pair's events."""
    for start, end in pairs:
        cupti.mark_sample()
        before()
        start.record()
        replay()
        end.record()


def us_per_call(pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]], calls: int) -> list[float]:
    """Each event pair's time (after the GPU passed its end event), in us per call of `calls`."""
    return [start.elapsed_time(end) * MS_TO_US / calls for start, end in pairs]


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


def replays_covering(seconds: float, replay_s: float) -> int:
    """Replays of `replay_s` each that keep the GPU busy for `seconds` (at least 1, at most
    MAX_WARM_REPLAYS)."""
    return max(1, min(MAX_WARM_REPLAYS, math.ceil(seconds / replay_s)))


def calls_for(per_call_us: float, min_sample_s: float, cap: int) -> int:
    """Calls that make one sample last at least `min_sample_s` (at least 1, at most `cap`)."""
    per_call_us = max(per_call_us, 1e-3)
    return max(1, min(cap, math.ceil(min_sample_s * 1e6 / per_call_us)))


def capture(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    """A graph of `calls` unrolled calls, captured on a side stream (a graph cannot be captured on
    the legacy default stream). One eager call on that same stream first lets libraries create
    their per-stream handles and workspaces, and lets a call prepare what must live on the stream
    it runs on (the cuDNN RNN backward's forward: autograd runs a backward op on its forward's
    stream, so a forward made on another stream would put the backward outside the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=side):
            for _ in range(calls):
                fn()
    except Exception:
        _end_rng_capture()
        raise
    torch.cuda.synchronize()
    return graph


def _end_rng_capture() -> None:
    """Leave torch's CUDA RNG as a finished capture leaves it. A capture marks the default
    generator as capturing and only a capture that ends well unmarks it: after a failed one
    (cudaStreamEndCapture refusing an invalidated capture) every later random draw on the GPU
    failed with "Offset increment outside graph capture encountered unexpectedly" (H100, torch
    2.11), the next kernels' inputs included. A capture that succeeds ends the state."""
    torch.cuda.synchronize()
    scratch = torch.zeros(1, device="cuda")
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        scratch.add_(1.0)
    torch.cuda.synchronize()


class BackToBack:
    """Samples of one graph's replays, each between two events, with the next sample always
    enqueued before the host waits on the current one: the GPU runs sample after sample without
    a gap, as a native loop or a training step does. With a gap per sample (the host waiting,
    reading the clock, deciding whether to stop) tf32 GEMMs over 100 us ran a median 7% (up to 16%)
    faster than a native loop over cuBLAS on an H100, 2% back to back: the idle time lowers the
    average power, and the power limiter grants a higher clock. Only the first sample waits behind
    the spin kernel (hold_stream); the others wait behind the previous sample."""

    def __init__(self, replay: Callable[[], None], calls: int, during: Callable[[], None] = _no_probe) -> None:
        self.replay, self.calls, self.during = replay, calls, during
        self.in_flight: deque[tuple[torch.cuda.Event, torch.cuda.Event]] = deque()

    def _enqueue(self) -> None:
        start, end = _events()
        start.record()
        self.replay()
        end.record()
        self.in_flight.append((start, end))

    def take(self) -> float:
        """Microseconds per call of the oldest sample in flight (one more is enqueued first)."""
        if not self.in_flight:
            hold_stream()
            self._enqueue()
        self._enqueue()
        self.during()
        start, end = self.in_flight.popleft()
        end.synchronize()
        return start.elapsed_time(end) * MS_TO_US / self.calls


class KernelTimes:
    """Samples of one graph's replays timed by CUPTI (METHOD_KERNELS): a call's time is its span,
    from its first kernel's start to its last kernel's end (cupti.call_time_us). Waits inside a
    call (split-K's before its reduction) count; the gap the GPU leaves between one call's last
    kernel and the next call's first does not. That gap is what every back-to-back timer adds, the
    harness's events and a C++ loop alike (H100, the training GEMMs under 10 us: a C++ graph loop
    over CUPTI's spans, median 1.034, up to 1.24).

    A sample is the mean span of `chunk` consecutive calls of a replay (cupti.chunk_times_us): a
    replay holds enough calls for the events to time it (min_sample_s), which CUPTI does not need,
    and reading records costs the host ~10 us each (H100 machine, tests/benchmarks/cupti_cost.py),
    so a replay cut into samples of ~KERNEL_SAMPLE_S gives the stopping rule the samples it needs
    from few records. The first batch (`start`, after KERNEL_WARM_S of replays) also tells whether
    CUPTI can time these calls.

    Replays are recorded in batches, each replay behind the marker kernel and between two events
    (their figure per call is kept: `graph_events_us` in the notes, the period a back-to-back
    loop reads). While the host reads a batch's records and starts the next recording, replays
    enqueued right after the batch keep the GPU busy, as BackToBack does: as many as cover the
    host's time between the last two batches."""

    def __init__(self, replay: Callable[[], None], calls: int, sample_s: float, chunk: int,
                 during: Callable[[], None] = _no_probe) -> None:
        self.replay, self.calls, self.chunk, self.during = replay, calls, chunk, during
        self.sample_s = max(sample_s, 1e-9)  # GPU time of one replay
        self.per_batch = self._replays_per_batch(1)
        self.host_s = HOST_S_GUESS
        self.left = math.nan  # when the host last left the GPU with replays to run
        self.pending: deque[float] = deque()
        self.warm_replays = replays_covering(KERNEL_WARM_S, self.sample_s)
        self.events_us: list[float] = []
        self.notes: dict[str, Any] = {}

    def _replays_per_batch(self, kernels_per_call: int) -> int:
        return max(1, min(math.ceil(KERNEL_BATCH_S / self.sample_s), BATCH_RECORDS // (self.calls * kernels_per_call)))

    def _keep_busy(self) -> None:
        for _ in range(replays_covering(self.host_s, self.sample_s)):
            self.replay()
        self.left = time.perf_counter()

    def _batch(self, replays: int) -> tuple[list[list[cupti.DeviceEvent]], list[float]]:
        """The record split by replay, and the events' us per call of each replay."""
        pairs = [_events() for _ in range(replays)]
        if math.isnan(self.left):
            self._keep_busy()
        with cupti.recording() as prof:
            self.host_s = time.perf_counter() - self.left
            enqueue_marked(pairs, self.replay)
            self.during()
        self._keep_busy()
        return cupti.split_at_markers(cupti.device_events(prof)), us_per_call(pairs, self.calls)

    def _add(self, groups: list[list[cupti.DeviceEvent]], timed: list[float]) -> None:
        self.events_us += timed
        if len(groups) == len(timed):
            for group, t in zip(groups, timed, strict=False):
                self.pending.extend(cupti.chunk_times_us(group, self.calls, self.chunk) if group else [t])
        else:  # a record that cannot be split by replay: the events' figures stand in for the batch
            self.notes["samples_timed_by_events"] = self.notes.get("samples_timed_by_events", 0) + len(timed)
            self.pending.extend(timed)
        self.notes["graph_events_us"] = statistics.median(self.events_us)

    def start(self) -> str | None:
        """Record the first batch (PROBE_REPLAYS replays at most); None when CUPTI timed it (its
        samples are the first taken), else why these calls cannot be timed by CUPTI."""
        replays = min(self.per_batch, PROBE_REPLAYS)
        try:
            cupti.start_once()  # before the warm replays, which cover a tenth of a second, not seconds
            for _ in range(self.warm_replays):
                self.replay()
            groups, timed = self._batch(replays)
        except Exception as exc:  # noqa: BLE001 - no CUPTI (or a profiler already running): events time it
            return f"CUPTI unavailable: {type(exc).__name__}: {exc}"[:300]
        if len(groups) != replays or not all(groups) or len(groups[0]) % self.calls:
            return (f"CUPTI recorded {sum(len(g) for g in groups)} GPU activities in {len(groups)} replays "
                    f"for {replays} replays of {self.calls} calls")
        self.per_batch = self._replays_per_batch(len(groups[0]) // self.calls)
        self._add(groups, timed)
        return None

    def take(self) -> float:
        """Microseconds per call of the next sample (a batch is recorded when none is pending)."""
        if not self.pending:
            self._add(*self._batch(self.per_batch))
        return self.pending.popleft()


def graph_sampler(fn: Callable[[], object], min_sample_s: float, during: Callable[[], None] = _no_probe,
                  kernel_time: bool = False) -> Sampler:
    """Calibrate from eager event timing, capture, and re-capture once if a replay is short; with
    `kernel_time`, calls shorter than KERNEL_TIMED_BELOW_US are timed by CUPTI (KernelTimes) where
    it can."""
    estimate = time_eager(fn, 3)
    calls = calls_for(estimate, min_sample_s, MAX_CALLS_PER_GRAPH)
    graph = capture(fn, calls)
    start, end = _events()

    def replay_us(g: torch.cuda.CUDAGraph, n: int) -> float:
        hold_stream()
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * MS_TO_US / n

    per_call = replay_us(graph, calls)
    warmup = 4 + 2 * calls
    better = calls_for(per_call, min_sample_s, MAX_CALLS_PER_GRAPH)
    if better > calls * 1.5:  # the eager estimate was launch-bound: the graph runs faster
        del graph
        calls = better
        graph = capture(fn, calls)
        per_call = replay_us(graph, calls)
        warmup += 2 * calls
    warmup += calls
    notes: dict[str, Any] = {}
    if kernel_time and per_call < KERNEL_TIMED_BELOW_US:
        chunk = calls_for(per_call, KERNEL_SAMPLE_S, calls)
        kernels = KernelTimes(graph.replay, calls, per_call * calls / 1e6, chunk, during)
        why_not = kernels.start()
        if why_not is None:
            return Sampler(METHOD_KERNELS, chunk, kernels.take, warmup + kernels.warm_replays * calls, kernels.notes,
                           replay=graph.replay, replay_calls=calls)
        notes["kernel_timer"] = why_not
    samples = BackToBack(graph.replay, calls, during)
    return Sampler(METHOD_GRAPH, calls, samples.take, warmup, notes, replay=graph.replay, replay_calls=calls)


def quick_us(fn: Callable[[], object], min_sample_s: float = QUICK_SAMPLE_S, samples: int = QUICK_SAMPLES) -> float:
    """A short figure for choosing among candidate implementations (cuDNN engines), taken the
    way the measurement takes its samples: a CUDA graph of calls lasting `min_sample_s`, replayed
    back to back and timed by events; the median of `samples` replays after one untimed. Where
    the call cannot be captured, eager calls between events instead."""
    estimate = time_eager(fn, 2)
    calls = calls_for(estimate, min_sample_s, MAX_CALLS_PER_GRAPH)
    try:
        graph = capture(fn, calls)
    except Exception:  # noqa: BLE001 - not capturable: time eagerly, as the measurement would
        torch.cuda.synchronize()
        return statistics.median(time_eager(fn, calls) for _ in range(samples))
    back_to_back = BackToBack(graph.replay, calls)
    back_to_back.take()
    figure = statistics.median(back_to_back.take() for _ in range(samples))
    torch.cuda.synchronize()
    del graph
    return figure


def _eager_replay(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    def replay() -> None:
        for _ in range(calls):
            fn()
    return replay


def host_launch_notes() -> dict[str, Any]:
    """For timings that count the host's launches (eager, cold): whether CUPTI was attached while
    they were taken (cupti.py: once started it slows every launch; kernel time starts it)."""
    return {"cupti_attached": True} if cupti.attached() else {}


def eager_sampler(fn: Callable[[], object], min_sample_s: float, reason: str,
                  during: Callable[[], None] = _no_probe) -> Sampler:
    per_call = time_eager(fn, 2)
    calls = calls_for(per_call, min_sample_s, MAX_CALLS_EAGER)
    shown = min(calls, EAGER_PROFILED_CALLS)
    return Sampler(METHOD_EAGER, calls, lambda: time_eager(fn, calls, during), 2,
                   {"eager_reason": reason, **host_launch_notes()}, replay=_eager_replay(fn, shown), replay_calls=shown)


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
    return Sampler(METHOD_COLD, 1, take, 1, {"flush_bytes": flush.numel() * 4, **host_launch_notes()}, replay=fn,
                   replay_calls=1, before_replay=lambda: flush.fill_(1.0))


def sampler_for(fn: Callable[[], object], settings: Settings, capturable: bool, device: torch.device,
                during: Callable[[], None] = _no_probe) -> Sampler:
    if settings.cold:
        return cold_sampler(fn, device, during)
    if not capturable:
        return eager_sampler(fn, settings.min_sample_s, "work cannot be captured in a CUDA graph", during)
    try:
        return graph_sampler(fn, settings.min_sample_s, during, settings.kernel_time)
    except Exception as exc:  # noqa: BLE001 - capture refused (host sync, unsupported op): time eagerly
        torch.cuda.synchronize()
        return eager_sampler(fn, settings.min_sample_s, f"graph capture failed: {type(exc).__name__}: {exc}"[:300],
                             during)


def select_unthrottled(samples: list[float], clocks: list[float | None], low: list[bool], min_keep: int
                       ) -> tuple[list[float], list[float], int, int]:
    """(kept samples, their clocks, discarded, throttled-but-kept). The samples flagged `low`
    (settling.throttled) are dropped if at least `min_keep` remain."""
    n_low = sum(low)
    if n_low == 0 or len(samples) - n_low < min_keep:
        return samples, [c for c in clocks if c is not None], 0, n_low
    kept = [(s, c) for s, c, lo in zip(samples, clocks, low, strict=False) if not lo]
    return [s for s, _ in kept], [c for _, c in kept if c is not None], n_low, 0


@dataclass(frozen=True)
class Sampling:
    """What the stopping loop took: the steady stretch's samples with the clock reading and the
    throttle flag of each, why it stopped, and what was left out before the clock first moved."""

    samples: list[float]
    readings: list[ClockReading]
    low: list[bool]
    reason: str
    settle_samples: int = 0
    settle_s: float = 0.0


def run_samples(sampler: Sampler, rule: StopRule, clock: Callable[[], ClockReading],
                now: Callable[[], float] = time.perf_counter, reference: Callable[[], float] = lambda: 0.0,
                rest: Callable[[float], None] = time.sleep) -> Sampling:
    """Take samples until the rule stops.

    nvbench's throttle handling (settling.throttled decides): a throttled sample is not shown
    to the stopping rule, and the GPU rests RECOVERY_S before the next sample, so a heat-capped
    stretch does not decide the figure. At the clock's first move between boost and below
    (settling.SettleWatch) the samples so far are left out and the rule starts over, its
    minimum time counted from there; while a share of the readings since are power_limited
    (settling.stretch_limited), the rule's longer minimum for a limited clock applies. Past twice
    the time cap the loop stops whatever the clocks say (then the result says throttled)."""
    samples: list[float] = []
    readings: list[ClockReading] = []
    low: list[bool] = []
    counted: list[float] = []
    watch = SettleWatch()
    first = limited = 0
    start = stretch = now()
    while True:
        samples.append(sampler.take())
        reading = clock()
        ref = reference()
        readings.append(reading)
        low.append(throttled(reading, ref))
        if watch.observe(reading, ref):
            # The reading was taken while this sample ran: the stretch begins with the next one.
            first, counted, limited, stretch = len(samples), [], 0, now()
        else:
            limited += power_limited(reading, ref)
            if not low[-1]:
                counted.append(samples[-1])
        t = now()
        reason = rule.decide(counted, t - stretch, stretch_limited(limited, len(samples) - first)) if counted else None
        if not reason and (t - start >= 2 * rule.time_cap_s or len(samples) >= rule.max_samples):
            reason = MAX_SAMPLES if len(samples) >= rule.max_samples else TIME_CAP
        if reason:
            if first >= len(samples):  # stopped right at the move: keep what there is
                first = 0
            return Sampling(samples[first:], readings[first:], low[first:], reason, first,
                            stretch - start if first else 0.0)
        if low[-1]:
            rest(RECOVERY_S)


def measure(fn: Callable[[], object], rule: StopRule, settings: Settings, capturable: bool,
            device: torch.device, clocks: ClockReader) -> tuple[Measurement, dict[str, Any]]:
    """Time `fn` on the GPU; returns the measurement and notes for the part's info (with the
    profiler's figures beside it when `settings.verify_timing`)."""
    reading = [ClockReading()]

    def during() -> None:
        reading[0] = clocks.reading()

    sampler = sampler_for(fn, settings, capturable, device, during)
    got = run_samples(sampler, rule, lambda: reading[0], reference=lambda: clocks.max_seen)
    kept, kept_clocks, discarded, throttled_kept = select_unthrottled(
        got.samples, [r.mhz for r in got.readings], got.low, rule.min_samples)
    notes = dict(sampler.notes)
    active = clocks.throttle_reasons()
    if active:
        notes["nvml_clock_event_reasons"] = active
    if throttled_kept:
        notes["throttled_samples_kept"] = throttled_kept
    capped = sum(r.power_capped for r in got.readings)
    if capped:
        notes["power_capped_samples"] = capped
    if got.settle_samples:
        notes["clock_settle"] = {"samples_left_out": got.settle_samples, "seconds": round(got.settle_s, 3)}
    if clocks.max_seen:
        notes["sm_clock_reference_mhz"] = clocks.max_seen
    temperature = clocks.temperature_c()
    if temperature is not None:
        notes["gpu_temp_c"] = temperature
    m = Measurement.of(kept, method=sampler.method, calls_per_sample=sampler.calls, warmup_calls=sampler.warmup_calls,
                       stop_reason=got.reason, target_rel_precision=rule.target_rel_precision, discarded=discarded,
                       clocks_mhz=tuple(kept_clocks))
    if settings.verify_timing and sampler.replay is not None:
        notes["profiler"] = verify(sampler, m.stats.median, m.stats.n * m.stats.median * sampler.calls / 1e6)
    return m, notes


def profile_samples(replay: Callable[[], None], calls: int, samples: int = 1, warm_replays: int = 1,
                    before: Callable[[], None] = _no_probe) -> dict[str, Any]:
    """CUPTI's record of `samples` samples taken back to back as the harness takes them: the marker
    kernel, then `before` (the cold measurement's flush: exactly one kernel, not counted), and the
    replay of `calls` calls between two events. Returns cupti.sample_figures: the kernels' figures
    with `events_us`, the events' own figure per call for the same samples, and `timer_ratio`, the
    median over samples of events / busy: how far an event timer is from the kernels' durations
    on the very same executions.

    The GPU must be in the state it was timed in: starting the profiler takes the host a
    millisecond, and an idle GPU regains meanwhile the clock the power limiter had taken under a
    large GEMM (a profiled replay then ran up to 20% faster than the timed ones, H200). So
    `warm_replays` replays are enqueued first and run while it starts."""
    cupti.start_once()  # before the warm replays: CUPTI's first start takes seconds
    pairs = [_events() for _ in range(samples)]
    for _ in range(max(1, warm_replays)):
        replay()
    with cupti.recording() as prof:
        enqueue_marked(pairs, replay, before)
        torch.cuda.synchronize()
    groups = cupti.split_at_markers(cupti.device_events(prof))
    if before is not _no_probe:
        groups = [g[1:] for g in groups]
    timed = us_per_call(pairs, calls)
    if len(groups) != samples or not all(groups):
        return {"kernel_us": math.nan, "kernels_per_call": 0.0, "kernel_names": [], "calls": calls,
                "samples": samples, "events_us": statistics.median(timed), "timer_ratio": math.nan}
    return {**cupti.sample_figures(groups, calls, timed), "calls": calls, "samples": samples}


def profiler_kernel_us(fn: Callable[[], object], calls: int = 1) -> dict[str, Any]:
    """The profiler's figures (profile_samples) for `calls` eager calls of `fn`."""
    return profile_samples(_eager_replay(fn, calls), calls)


def verify(sampler: Sampler, harness_us: float, window_s: float) -> dict[str, Any]:
    """The profiler's time per call (call_us) of samples taken right after the measurement (in the
    same GPU state, covering `window_s` as the timed ones did) beside the harness time; flagged
    when they part by more than VERIFY_TOLERANCE."""
    assert sampler.replay is not None
    sample_s = max(harness_us * sampler.replay_calls / 1e6, 1e-9)
    samples = max(1, min(PROFILE_MAX_SAMPLES, math.ceil(window_s / sample_s),
                         MAX_RECORDED_CALLS // sampler.replay_calls))
    warm = replays_covering(PROFILE_WARM_S, sample_s)
    prof = profile_samples(sampler.replay, sampler.replay_calls, samples, warm, sampler.before_replay)
    per_call = cupti.call_us(prof)
    ratio = harness_us / per_call if per_call > 0 else math.inf
    return {**prof, "harness_us": harness_us, "ratio": ratio, "agrees": abs(ratio - 1.0) <= VERIFY_TOLERANCE}
