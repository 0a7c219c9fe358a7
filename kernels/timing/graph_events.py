"""Hot measurement by events (METHOD_GRAPH): replays of a calibrated CUDA graph, each between two
events, back to back.

Samples follow each other on the GPU without a gap, as in a native loop or a training step: with
a gap per sample (the host waiting, reading the clock, deciding whether to stop) the idle time
lowers the average power, the power limiter grants a higher clock, and heavy kernels read faster
than a native loop runs them. Also `quick_us`, the short figure that compares candidate
implementations (cuDNN engines) the way the measurement takes its samples."""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from .events import (
    MS_TO_US,
    EagerFigure,
    EventPair,
    calls_for,
    event_pair,
    held_eager_figure,
    hold_stream,
    time_eager,
)
from .graph import MAX_CALLS_PER_GRAPH, RECAPTURE_FACTOR, CalibratedGraph, capture
from .sampler import Sampler, no_probe

METHOD_GRAPH = "cuda-graph-events"
# Candidates (cuDNN engines) are first compared by QUICK_SAMPLES replays of QUICK_SAMPLE_S each,
# after one untimed; the close ones are timed again with more (backends/cudnn/engine_choice.py).
QUICK_SAMPLE_S = 0.001
QUICK_SAMPLES = 1
QUICK_ESTIMATE_CALLS = 2  # eager calls that size quick_us's graph
# From this long a call on, the host enqueues the next eager call while the GPU runs the current
# one, so eager calls time as a graph's do (launch gaps are hidden): quick_us may stop at them.
EAGER_EXACT_US = 100.0


class BackToBack:
    """Samples of one graph's replays, each between two events, with the next sample always
    enqueued before the host waits on the current one, so the GPU never idles between samples.
    Only the first sample waits behind the spin kernel (events.hold_stream); the others wait
    behind the previous sample."""

    def __init__(self, replay: Callable[[], None], calls: int, during: Callable[[], None] = no_probe) -> None:
        self.replay, self.calls, self.during = replay, calls, during
        self.in_flight: deque[EventPair] = deque()

    def _enqueue(self) -> None:
        start, end = event_pair()
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


def graph_events_sampler(
    calibrated: CalibratedGraph, during: Callable[[], None] = no_probe, notes: dict[str, Any] | None = None
) -> Sampler:
    """Back-to-back replays of the calibrated graph, timed by events."""
    graph, calls = calibrated.graph, calibrated.calls
    samples = BackToBack(graph.replay, calls, during)
    return Sampler(
        METHOD_GRAPH,
        calls,
        samples.take,
        calibrated.warmup_calls,
        notes if notes is not None else {},
        replay=graph.replay,
        replay_calls=calls,
    )


def screen_figure(fn: Callable[[], object]) -> EagerFigure:
    """A candidate's cheap first figure: one untimed call (it loads the candidate's kernels), then
    QUICK_ESTIMATE_CALLS eager calls behind a hold (events.held_eager_figure); quick_us takes it as its
    estimate instead of making its own."""
    fn()
    return held_eager_figure(fn, QUICK_ESTIMATE_CALLS)


def quick_us(
    fn: Callable[[], object],
    min_sample_s: float = QUICK_SAMPLE_S,
    samples: int = QUICK_SAMPLES,
    out_of_contest_us: float = math.inf,
    estimate: EagerFigure | None = None,
) -> float:
    """A short figure for choosing among candidate implementations (cuDNN engines), taken the
    way the measurement takes its samples: a CUDA graph of calls lasting `min_sample_s`, replayed
    back to back and timed by events; the median of `samples` replays after one untimed. Where
    the call cannot be captured, eager calls between events instead.

    A call whose eager estimate is already above `out_of_contest_us` (and at least EAGER_EXACT_US,
    where eager calls run back to back on the GPU as a graph's do) keeps that estimate as its
    figure: a candidate that much slower than the fastest cannot win, and capturing and replaying
    the slow engines of a training run's convolutions cost seconds. Only an estimate the GPU made
    counts so (events.EagerFigure.gpu_bound): a slow host's launch time decides nothing. `estimate`:
    the candidate's screen figure (screen_figure), taken already."""
    # untimed first: a candidate's first call also loads its kernels (CUDA's lazy loading), and an
    # estimate that counted it put fast engines out of contest (51.8 us timed 115 us eagerly)
    eager = estimate or screen_figure(fn)
    if eager.gpu_bound and eager.us_per_call >= max(out_of_contest_us, EAGER_EXACT_US):
        return eager.us_per_call
    calls = calls_for(eager.us_per_call, min_sample_s, MAX_CALLS_PER_GRAPH)
    figure = _replayed_us(fn, calls, samples)
    if figure is None:  # not capturable: time eagerly, as the measurement would
        return statistics.median(time_eager(fn, calls) for _ in range(samples))
    better = calls_for(figure, min_sample_s, MAX_CALLS_PER_GRAPH)
    if not eager.gpu_bound and better > calls * RECAPTURE_FACTOR:  # the host's time sized the graph short
        figure = _replayed_us(fn, better, samples) or figure
    return figure


def _replayed_us(fn: Callable[[], object], calls: int, samples: int) -> float | None:
    """The median of `samples` back-to-back replays of a graph of `calls` calls (after one untimed),
    in us per call; None where the call cannot be captured."""
    try:
        graph = capture(fn, calls)
    except Exception:  # noqa: BLE001 - not capturable: the caller times eagerly
        torch.cuda.synchronize()
        return None
    back_to_back = BackToBack(graph.replay, calls)
    back_to_back.take()
    figure = statistics.median(back_to_back.take() for _ in range(samples))
    torch.cuda.synchronize()
    del graph
    return figure
