"""Hot measurement by kernel time (METHOD_KERNELS, the default for short calls): the same graph
replays as graph_events, but a call's time is its kernels' own span on the GPU's clock, read by
CUPTI (cupti.py).

Between two dependent kernels the GPU leaves a short gap, which an event timer counts, as every
back-to-back loop does: for a call of a few microseconds that gap is several percent, and the
kernel's own duration is the figure asked for. Calls under KERNEL_TIMED_BELOW_US are timed this
way; longer ones by events, where the gap no longer matters.

CUPTI, once started, stays attached to the process and slows the host's launches (cupti.py).
Graph replays do not wait on the host, so only timings that count host launches are exposed:
the eager fallback and --cold, whose notes then say `cupti_attached` (eager.host_launch_notes).
CUPTI's first start takes seconds and runs during the device warm-up."""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from . import cupti
from .events import US_PER_S, calls_for, enqueue_marked, event_pair, replays_covering, us_per_call
from .graph import CalibratedGraph
from .sampler import Sampler, no_probe

METHOD_KERNELS = "cuda-graph-cupti"
# Calls shorter than this (per call, as a graph replay timed by events) are timed by CUPTI: below
# it the gap between dependent kernels is a noticeable share of a call.
KERNEL_TIMED_BELOW_US = 20.0
KERNEL_BATCH_S = 0.05  # GPU time a batch records at most: the host reads it while replays run on
BATCH_RECORDS = 4000  # kernel records a batch holds at most (the host reads records one by one)
KERNEL_SAMPLE_S = 100e-6  # GPU time of one CUPTI-timed sample (a replay's chunk of calls)
PROBE_REPLAYS = 4  # replays in the first batch, which shows whether CUPTI can time the calls
# GPU time of replays run before the first batch: a short call's kernels keep speeding up for a
# while after its first calls.
KERNEL_WARM_S = 0.1
HOST_S_GUESS = 0.003  # host time between two batches (a recording's start and stop), until one is measured


class KernelTimes:
    """Samples of one graph's replays timed by CUPTI: a call's time is its span, from its first
    kernel's start to its last kernel's end (cupti.call_time_us). Waits inside a call (split-K's
    before its reduction) count; the gap the GPU leaves between one call's last kernel and the next
    call's first does not.

    A sample is the mean span of `chunk` consecutive calls of a replay (cupti.chunk_times_us): a
    replay holds enough calls for the events to time it (min_sample_s), which CUPTI does not need,
    and reading records costs the host time per record, so a replay cut into samples of
    ~KERNEL_SAMPLE_S gives the stopping rule the samples it needs from few records. The first
    batch (`start`, after KERNEL_WARM_S of replays) also tells whether CUPTI can time these calls.

    Replays are recorded in batches, each replay behind the marker kernel and between two events
    (their figure per call is kept: `graph_events_us` in the notes, the period a back-to-back
    loop reads). While the host reads a batch's records and starts the next recording, replays
    enqueued right after the batch keep the GPU busy, as graph_events.BackToBack does: as many as
    cover the host's time between the last two batches."""

    def __init__(
        self, replay: Callable[[], None], calls: int, sample_s: float, chunk: int, during: Callable[[], None] = no_probe
    ) -> None:
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
        pairs = [event_pair() for _ in range(replays)]
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
            return (
                f"CUPTI recorded {sum(len(g) for g in groups)} GPU activities in {len(groups)} replays "
                f"for {replays} replays of {self.calls} calls"
            )
        self.per_batch = self._replays_per_batch(len(groups[0]) // self.calls)
        self._add(groups, timed)
        return None

    def take(self) -> float:
        """Microseconds per call of the next sample (a batch is recorded when none is pending)."""
        if not self.pending:
            self._add(*self._batch(self.per_batch))
        return self.pending.popleft()


def kernel_sampler(calibrated: CalibratedGraph, during: Callable[[], None] = no_probe) -> Sampler | str:
    """Replays of the calibrated graph timed by CUPTI, or why CUPTI cannot time them."""
    graph, calls, per_call = calibrated.graph, calibrated.calls, calibrated.per_call_us
    chunk = calls_for(per_call, KERNEL_SAMPLE_S, calls)
    kernels = KernelTimes(graph.replay, calls, per_call * calls / US_PER_S, chunk, during)
    why_not = kernels.start()
    if why_not is not None:
        return why_not
    return Sampler(
        METHOD_KERNELS,
        chunk,
        kernels.take,
        calibrated.warmup_calls + kernels.warm_replays * calls,
        kernels.notes,
        replay=graph.replay,
        replay_calls=calls,
    )
