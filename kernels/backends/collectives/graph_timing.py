"""Collectives timed as CUDA graph replays (nccl-tests' -G): the launch cost leaves the measurement.

Each eager collective is launched from Python (torch.distributed or nccl4py): tens of microseconds
of host work per call, more than a short collective takes on NVLink. As nccl-tests -G does, the
timed calls are captured once into a CUDA graph on every rank and the graph is replayed; a sample
is the replays between two CUDA events on the capturing stream, so only the device's time counts.

Ranks replay in lock-step: before every sample the host waits for its device, then all ranks meet
at a barrier (the control group, host side), then each enqueues a one-element all-reduce (the start
line), its start event and the replays. The host barrier alone leaves the ranks' launches tens of
microseconds apart (more on more ranks), and the first rank's events then time its wait for the
last: on 2 and 4 H200s that read 5-30% below nccl-tests' bus bandwidth at 4-128 MiB. The start line
completes on every rank within a hop's latency, so the start events fire together on the devices.

A capture runs nothing (NCCL's calls become graph nodes), so capturing needs no agreement between
ranks; the eager call made first on the capturing stream does, and every rank makes it at the same
point.

The graphs of one kernel's part are kept while it is being timed and dropped at the next part's
first sample, so that a sweep up to 1 GiB does not keep every size's graph."""

from __future__ import annotations

from collections.abc import Callable

import torch

GRAPH_METHOD = "collective-cuda-graph-events"
# Calls per captured graph at most (nccl-tests -G captures its -n iterations, 100 by default);
# a sample of more calls replays the graph several times.
MAX_CALLS_PER_GRAPH = 100
# A replayed sample lasts at least this long (Settings.min_sample_s where longer). Back-to-back NCCL
# calls overlap one's tail with the next one's start only in a long run of them, as in nccl-tests'
# 100-call launches: on 2 and 4 H200s, samples of 0.5-1 ms read 5-25% below nccl-tests' busbw at
# 16-256 MiB where samples of 20 ms read within 5% (tests/benchmarks/results/collectives-h200x4).
MIN_SAMPLE_S = 0.02
MS_PER_S = 1e3
# Whether this process captured a collective: torch.distributed's destroy_process_group can hang after
# NCCL work was captured in a graph (pytorch/pytorch#115388), so the process then leaves the group to
# its exit (torch_dist.py _destroy).
_captured = False


def captured() -> bool:
    return _captured


class GraphTimer:
    """Captures and replays one rank's timed collective calls on `device`."""

    method = GRAPH_METHOD
    min_sample_s = MIN_SAMPLE_S

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self.fn: Callable[[], object] | None = None
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}

    def _graph(self, fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
        if fn is not self.fn:  # a new part: the previous part's graphs are no longer needed
            self.fn, self.graphs = fn, {}
            current = torch.cuda.current_stream(self.device)
            self.stream.wait_stream(current)
            with torch.cuda.stream(self.stream):  # the library's per-stream set-up, outside the capture
                fn()
            current.wait_stream(self.stream)
        if calls not in self.graphs:
            global _captured
            _captured = True
            torch.cuda.synchronize(self.device)
            graph = torch.cuda.CUDAGraph()
            # thread_local: the process group's watchdog thread may query its events during the capture
            with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
                for _ in range(calls):
                    fn()
            torch.cuda.synchronize(self.device)
            self.graphs[calls] = graph
        return self.graphs[calls]

    def timed(
        self, fn: Callable[[], object], calls: int, barrier: Callable[[], None], start_line: Callable[[], object]
    ) -> float:
        """Seconds for `calls` calls on this rank: replays of a graph of up to MAX_CALLS_PER_GRAPH
        calls between two events, started after every rank reached `barrier` and, on the device,
        after `start_line` (a tiny collective on the timing stream) completed."""
        per_graph = min(calls, MAX_CALLS_PER_GRAPH)
        replays = max(1, round(calls / per_graph))
        graph = self._graph(fn, per_graph)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        barrier()
        with torch.cuda.stream(self.stream):
            start_line()
            start.record(self.stream)
            for _ in range(replays):
                graph.replay()
            end.record(self.stream)
        end.synchronize()
        seconds = start.elapsed_time(end) / MS_PER_S
        return seconds * calls / (replays * per_graph)  # the time of `calls` calls at the measured rate
