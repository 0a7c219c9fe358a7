"""The profiler cross-check (--verify-timing): right after the measurement, CUPTI (through
torch.profiler) records a few more samples taken exactly as the timed ones (the same graph or
calls, the same event pairs, the GPU kept busy while the profiler starts). Its kernel durations
stand beside the harness's figure (`ratio`), and beside the events of those very samples
(`timer_ratio`), so a timing that parts from the kernels' own durations is flagged."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import torch

from . import cupti
from .eager import eager_replay
from .events import US_PER_S, enqueue_marked, event_pair, replays_covering, us_per_call
from .sampler import Sampler, no_probe

VERIFY_TOLERANCE = 0.05  # flag harness/profiler disagreement beyond 5%
MAX_RECORDED_CALLS = 20_000  # calls whose records one cross-check reads at once
# Replays kept running while the profiler starts (see profile_samples).
PROFILE_WARM_S = 0.1
# How much is profiled: samples covering as long as the timed ones did, so the power limiter's
# swing averages out as in the timed figure, at most this many samples (and MAX_RECORDED_CALLS).
PROFILE_MAX_SAMPLES = 1000
MIN_SAMPLE_S = 1e-9  # a sample's time is never taken as zero


def profile_samples(
    replay: Callable[[], object],
    calls: int,
    samples: int = 1,
    warm_replays: int = 1,
    before: Callable[[], object] = no_probe,
) -> dict[str, Any]:
    """CUPTI's record of `samples` samples taken back to back as the harness takes them: the marker
    kernel, then `before` (the cold measurement's flush: exactly one kernel, not counted), and the
    replay of `calls` calls between two events. Returns cupti.sample_figures: the kernels' figures
    with `events_us`, the events' own figure per call for the same samples, and `timer_ratio`, the
    median over samples of events / busy: how far an event timer is from the kernels' durations
    on the very same executions.

    The GPU must be in the state it was timed in: starting the profiler takes the host a while,
    and an idle GPU meanwhile regains the clock the power limiter had taken under a heavy kernel.
    So `warm_replays` replays are enqueued first and run while it starts."""
    cupti.start_once()  # before the warm replays: CUPTI's first start takes seconds
    pairs = [event_pair() for _ in range(samples)]
    for _ in range(max(1, warm_replays)):
        replay()
    with cupti.recording() as prof:
        enqueue_marked(pairs, replay, before)
        torch.cuda.synchronize()
    groups = cupti.split_at_markers(cupti.device_events(prof))
    if before is not no_probe:
        groups = [g[1:] for g in groups]
    timed = us_per_call(pairs, calls)
    if len(groups) != samples or not all(groups):
        return {
            "kernel_us": math.nan,
            "kernels_per_call": 0.0,
            "kernel_names": [],
            "calls": calls,
            "samples": samples,
            "events_us": statistics.median(timed),
            "timer_ratio": math.nan,
        }
    return {**cupti.sample_figures(groups, calls, timed), "calls": calls, "samples": samples}


def profiler_kernel_us(fn: Callable[[], object], calls: int = 1) -> dict[str, Any]:
    """The profiler's figures (profile_samples) for `calls` eager calls of `fn`."""
    return profile_samples(eager_replay(fn, calls), calls)


def verify(sampler: Sampler, harness_us: float, window_s: float) -> dict[str, Any]:
    """The profiler's time per call (call_us) of samples taken right after the measurement (in the
    same GPU state, covering `window_s` as the timed ones did) beside the harness time; flagged
    when they part by more than VERIFY_TOLERANCE."""
    assert sampler.replay is not None
    sample_s = max(harness_us * sampler.replay_calls / US_PER_S, MIN_SAMPLE_S)
    samples = max(
        1, min(PROFILE_MAX_SAMPLES, math.ceil(window_s / sample_s), MAX_RECORDED_CALLS // sampler.replay_calls)
    )
    warm = replays_covering(PROFILE_WARM_S, sample_s)
    prof = profile_samples(sampler.replay, sampler.replay_calls, samples, warm, sampler.before_replay)
    per_call = cupti.call_us(prof)
    ratio = harness_us / per_call if per_call > 0 else math.inf
    return {**prof, "harness_us": harness_us, "ratio": ratio, "agrees": abs(ratio - 1.0) <= VERIFY_TOLERANCE}
