"""CUDA events, the building block of every GPU timing: event pairs, the stream hold before a
sample that finds the GPU idle, eager calls between two events, and how many calls or replays
cover a given time."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from . import cupti
from .sampler import no_probe

MS_TO_US = 1e3
# Before a sample that finds the GPU idle (the first of a measurement, an eager or calibration
# sample) a spin kernel of this length runs (torch.cuda._sleep): the start event then fires only
# after the host has submitted the whole sample (launching a long graph takes the host tens of
# microseconds, which an idle GPU would otherwise count). nvbench holds the stream the same way.
# Later graph samples wait behind the previous one instead (graph_events.BackToBack).
HOLD_S = 200e-6
HOLD_CLOCK_HZ = 2.0e9  # cycles per second assumed when sizing the spin (it only has to be long enough)
MAX_WARM_REPLAYS = 1000  # replays_covering's cap

EventPair = tuple[torch.cuda.Event, torch.cuda.Event]


def event_pair() -> EventPair:
    """A start and an end event that can be timed."""
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def enqueue_marked(pairs: list[EventPair], replay: Callable[[], object],
                   before: Callable[[], object] = no_probe) -> None:
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


def hold_stream() -> None:
    """Keep the stream busy while the host enqueues the sample (see HOLD_S)."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int(HOLD_S * HOLD_CLOCK_HZ))


def time_eager(fn: Callable[[], object], calls: int, during: Callable[[], None] = no_probe) -> float:
    """Microseconds per call of `calls` back-to-back eager calls between two events."""
    start, end = event_pair()
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
