"""The eager fallback (METHOD_EAGER): back-to-back eager calls between two events, for work that
cannot be captured in a CUDA graph. Each sample counts the host's launches as well as the GPU's
work, so a short call reads its launch cost; the notes say why the graph was not used."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import cupti
from .events import calls_for, time_eager
from .sampler import Sampler, no_probe

METHOD_EAGER = "cuda-events-eager"
MAX_CALLS_EAGER = 1 << 14
EAGER_PROFILED_CALLS = 200  # an eager sample's calls profiled at once (--verify-timing)
EAGER_ESTIMATE_CALLS = 2  # eager calls that size a sample
EAGER_WARMUP_CALLS = 2  # the estimate's calls


def eager_replay(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    """`calls` eager calls of `fn`, as one replay for the profiler."""

    def replay() -> None:
        for _ in range(calls):
            fn()

    return replay


def host_launch_notes() -> dict[str, Any]:
    """For timings that count the host's launches (eager, cold): whether CUPTI was attached while
    they were taken (cupti.py: once started it slows every launch; kernel time starts it)."""
    return {"cupti_attached": True} if cupti.attached() else {}


def eager_sampler(
    fn: Callable[[], object], min_sample_s: float, reason: str, during: Callable[[], None] = no_probe
) -> Sampler:
    """Samples of eager calls lasting at least `min_sample_s`; `reason`: why not a graph."""
    per_call = time_eager(fn, EAGER_ESTIMATE_CALLS)
    calls = calls_for(per_call, min_sample_s, MAX_CALLS_EAGER)
    shown = min(calls, EAGER_PROFILED_CALLS)
    return Sampler(
        METHOD_EAGER,
        calls,
        lambda: time_eager(fn, calls, during),
        EAGER_WARMUP_CALLS,
        {"eager_reason": reason, **host_launch_notes()},
        replay=eager_replay(fn, shown),
        replay_calls=shown,
    )
