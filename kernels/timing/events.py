"""CUDA events, the building block of every GPU timing: event pairs, the stream hold before a
sample that finds the GPU idle, eager calls between two events, and how many calls or replays
cover a given time."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import cupti
from .sampler import no_probe

MS_TO_US = 1e3
US_PER_S = 1e6
# Before a sample that finds the GPU idle (the first of a measurement, an eager or calibration
# sample) a spin kernel of this length runs (torch.cuda._sleep): the start event then fires only
# after the host has submitted the whole sample (launching a long graph takes the host tens of
# microseconds, which an idle GPU would otherwise count). nvbench holds the stream the same way.
# Later graph samples wait behind the previous one instead (graph_events.BackToBack).
HOLD_S = 200e-6
HOLD_CLOCK_HZ = 2.0e9  # cycles per second assumed when sizing the spin (it only has to be long enough)
# An eager figure is the GPU's only if the host enqueued every call within this share of the hold (the
# rest is room for a GPU clocked above HOLD_CLOCK_HZ and for the spin's own launch).
HOLD_SHARE = 0.5
# Or if the host's enqueue time is under this share of the eager figure: the GPU waited on it for no longer.
HOST_SHARE = 0.05
HOLD_ROOM = 4.0  # held_eager_figure's second hold: this many times what the host took to enqueue the first
PACE_ROOM = 3.0  # its first hold: this many times what the host took to enqueue as many calls last time
MAX_HOLD_S = 0.05  # and no longer than this
MAX_WARM_REPLAYS = 1000  # replays_covering's cap

EventPair = tuple[torch.cuda.Event, torch.cuda.Event]


def event_pair() -> EventPair:
    """A start and an end event that can be timed."""
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def enqueue_marked(
    pairs: list[EventPair], replay: Callable[[], object], before: Callable[[], object] = no_probe
) -> None:
    """Samples for a CUPTI recording, one per event pair: the marker kernel that opens a sample in
    the record, `before` (untimed, e.g. the cold measurement's flush), then the replay between the
    pair's events."""
    for start, end in pairs:
        cupti.mark_sample()
        before()
        start.record()
        replay()
        end.record()


def us_per_call(pairs: list[EventPair], calls: int) -> list[float]:
    """Each event pair's time (after the GPU passed its end event), in us per call of `calls`."""
    return [start.elapsed_time(end) * MS_TO_US / calls for start, end in pairs]


def can_hold() -> bool:
    """Whether this PyTorch has the spin kernel hold_stream launches."""
    return hasattr(torch.cuda, "_sleep")


def hold_stream(seconds: float = HOLD_S) -> None:
    """Keep the stream busy for `seconds` while the host enqueues the sample (see HOLD_S)."""
    if can_hold():
        torch.cuda._sleep(int(seconds * HOLD_CLOCK_HZ))


@dataclass(frozen=True)
class EagerFigure:
    """`calls` eager calls between two events: microseconds per call, and how long the host took to
    enqueue them behind a hold of `hold_s`."""

    us_per_call: float
    calls: int
    enqueue_s: float
    hold_s: float

    @property
    def gpu_bound(self) -> bool:
        """Whether the figure is the GPU's: every call was enqueued before the hold ended (the events
        saw the GPU run the calls back to back), or the host's enqueue time is under HOST_SHARE of the
        figure (the GPU can have waited on the host for no longer than that). Otherwise the figure may
        be the host's launch time: an H100 host that took 0.1-3 ms to launch each cuDNN call put fast
        engines out of a race with eager figures up to 100 times their own (train, GPU-5c4e07fd, 2026-11-25)."""
        within_hold = can_hold() and self.enqueue_s < self.hold_s * HOLD_SHARE
        return within_hold or self.enqueue_s < HOST_SHARE * self.span_s

    @property
    def span_s(self) -> float:
        """The events' time for all the calls, in seconds."""
        return self.us_per_call * self.calls / US_PER_S


def eager_figure(
    fn: Callable[[], object], calls: int, during: Callable[[], None] = no_probe, hold_s: float = HOLD_S
) -> EagerFigure:
    """`calls` back-to-back eager calls between two events, behind a hold of `hold_s`."""
    start, end = event_pair()
    began = time.perf_counter()
    hold_stream(hold_s)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    enqueue_s = time.perf_counter() - began
    during()
    end.synchronize()
    return EagerFigure(start.elapsed_time(end) * MS_TO_US / calls, calls, enqueue_s, hold_s)


class HostPace:
    """How long this process's host took to enqueue an eager call, as last seen: held_eager_figure
    holds the stream that many times as long before its calls, so that on a host as fast as the
    last one the first figure is already the GPU's. Behind HOLD_S alone, two cuDNN calls (the Python
    frontend takes a hundred microseconds or more for each) outlasted half the hold: in a profile of
    train's first 72 convolution directions (H100, 2026-11-25) 685 of 740 eager figures were taken twice."""

    def __init__(self) -> None:
        self.s_per_call = 0.0

    def hold_for(self, calls: int) -> float:
        return min(MAX_HOLD_S, max(HOLD_S, PACE_ROOM * self.s_per_call * calls))

    def saw(self, figure: EagerFigure) -> None:
        self.s_per_call = figure.enqueue_s / figure.calls


PACE = HostPace()


def held_eager_figure(fn: Callable[[], object], calls: int, pace: HostPace = PACE) -> EagerFigure:
    """An eager figure that is the GPU's wherever a hold can make it so: behind a hold sized by
    the host's last pace, and where the host was slower than that, again behind one HOLD_ROOM times
    as long as it took."""
    figure = eager_figure(fn, calls, hold_s=pace.hold_for(calls))
    pace.saw(figure)
    if figure.gpu_bound or not can_hold():
        return figure
    return eager_figure(fn, calls, hold_s=min(MAX_HOLD_S, figure.enqueue_s * HOLD_ROOM))


def time_eager(fn: Callable[[], object], calls: int, during: Callable[[], None] = no_probe) -> float:
    """Microseconds per call of `calls` back-to-back eager calls between two events."""
    return eager_figure(fn, calls, during).us_per_call


def replays_covering(seconds: float, replay_s: float) -> int:
    """Replays of `replay_s` each that keep the GPU busy for `seconds` (at least 1, at most
    MAX_WARM_REPLAYS)."""
    return max(1, min(MAX_WARM_REPLAYS, math.ceil(seconds / replay_s)))


def calls_for(per_call_us: float, min_sample_s: float, cap: int) -> int:
    """Calls that make one sample last at least `min_sample_s` (at least 1, at most `cap`)."""
    per_call_us = max(per_call_us, 1e-3)
    return max(1, min(cap, math.ceil(min_sample_s * 1e6 / per_call_us)))
