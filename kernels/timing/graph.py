"""CUDA graphs for the hot measurements: capture `calls` unrolled calls, and calibrate the count
so one replay lasts a whole sample.

An eager Python loop launches a call far more slowly than a short kernel runs, and an event pair
around one launch costs more than a short kernel: a graph of unrolled calls, replayed between two
events, launches them back to back from the device (nvbench's hot measurement). Both
graph_events and cupti_kernel time replays of the graph made here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .events import MS_TO_US, US_PER_S, calls_for, event_pair, hold_stream, time_eager
from .work_stream import capture_stream, on_work_stream

MAX_CALLS_PER_GRAPH = 2000  # bounds capture time and graph memory for tiny kernels
RECAPTURE_FACTOR = 1.5  # re-capture once when the graph's own figure asks for this many times the calls
ESTIMATE_CALLS = 3  # eager calls that give the first estimate of a call shorter than a sample


def capture(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    """A graph of `calls` unrolled calls, captured on the process's work stream (work_stream.py),
    where every caller has made its eager calls first. Where none is set, on a side stream (a
    graph cannot be captured on the legacy default stream), after one eager call on that side
    stream: it lets libraries create their per-stream handles and workspaces, and lets a call
    prepare what must live on the stream it runs on (the cuDNN RNN backward's forward: autograd
    runs a backward op on its forward's stream, so a forward made on another stream would put the
    backward outside the capture)."""
    current = torch.cuda.current_stream()
    stream = capture_stream()
    if stream != current:
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            fn()
        current.wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
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
    failed with "Offset increment outside graph capture encountered unexpectedly", the next
    kernels' inputs included. A capture that succeeds ends the state."""
    torch.cuda.synchronize()
    scratch = torch.zeros(1, device="cuda")
    with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=capture_stream()):
        scratch.add_(1.0)
    torch.cuda.synchronize()


@dataclass
class CalibratedGraph:
    """A captured graph whose replay lasts at least a sample, its calls, one replay's time per
    call (us, events) and the calls made so far (warm-up)."""

    graph: torch.cuda.CUDAGraph
    calls: int
    per_call_us: float
    warmup_calls: int


def calibrated_graph(fn: Callable[[], object], min_sample_s: float) -> CalibratedGraph:
    """Calibrate from eager event timing, capture, and re-capture once if a replay is short (the
    eager estimate was launch-bound: the graph runs faster). A call that fills a sample by itself
    is timed eagerly once, not ESTIMATE_CALLS times: the graph holds one call either way, and a
    GRU of 1,500 steps spent seconds of a training run on estimates. `warmup_calls` counts every
    call the GPU ran here: the eager ones, capture's warm call where it makes one, the replays."""
    estimate = time_eager(fn, 1)
    warmup = 1
    if estimate < min_sample_s * US_PER_S:  # one call fills no sample: a better estimate sizes the graph
        estimate = time_eager(fn, ESTIMATE_CALLS)
        warmup += ESTIMATE_CALLS
    calls = calls_for(estimate, min_sample_s, MAX_CALLS_PER_GRAPH)
    graph = capture(fn, calls)
    start, end = event_pair()

    def replay_us(g: torch.cuda.CUDAGraph, n: int) -> float:
        hold_stream()
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * MS_TO_US / n

    capture_warm_calls = 0 if on_work_stream() else 1  # capture's eager call on its side stream
    per_call = replay_us(graph, calls)
    warmup += capture_warm_calls + calls
    better = calls_for(per_call, min_sample_s, MAX_CALLS_PER_GRAPH)
    if better > calls * RECAPTURE_FACTOR:
        del graph
        calls = better
        graph = capture(fn, calls)
        per_call = replay_us(graph, calls)
        warmup += capture_warm_calls + calls
    return CalibratedGraph(graph, calls, per_call, warmup)
