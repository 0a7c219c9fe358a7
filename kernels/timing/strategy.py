"""Which GPU measurement strategy times a call:

1. --cold: cold_l2 (one call per sample after flushing the L2);
2. work that cannot be captured in a CUDA graph: eager;
3. otherwise a calibrated graph (graph.py), whose replays are timed by CUPTI (cupti_kernel) when
   kernel time is on and a call is shorter than KERNEL_TIMED_BELOW_US and CUPTI can time it, else
   by events (graph_events; the notes say why CUPTI did not);
4. a capture that fails falls back to eager, with the reason in the notes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..results import Settings
from .cold_l2 import cold_sampler
from .cupti_kernel import KERNEL_TIMED_BELOW_US, kernel_sampler
from .eager import eager_sampler
from .graph import calibrated_graph
from .graph_events import graph_events_sampler
from .sampler import Sampler, no_probe

REASON_CHARS = 300  # an exception's text kept in the notes


def graph_sampler(
    fn: Callable[[], object], min_sample_s: float, during: Callable[[], None] = no_probe, kernel_time: bool = False
) -> Sampler:
    """Replays of a calibrated graph; with `kernel_time`, calls shorter than KERNEL_TIMED_BELOW_US
    are timed by CUPTI where it can."""
    calibrated = calibrated_graph(fn, min_sample_s)
    notes: dict[str, Any] = {}
    if kernel_time and calibrated.per_call_us < KERNEL_TIMED_BELOW_US:
        kernels = kernel_sampler(calibrated, during)
        if isinstance(kernels, Sampler):
            return kernels
        notes["kernel_timer"] = kernels
    return graph_events_sampler(calibrated, during, notes)


def sampler_for(
    fn: Callable[[], object],
    settings: Settings,
    capturable: bool,
    device: torch.device,
    during: Callable[[], None] = no_probe,
) -> Sampler:
    """The strategy that times `fn` under `settings` (see the module's docstring)."""
    if settings.cold:
        return cold_sampler(fn, device, during)
    if not capturable:
        return eager_sampler(fn, settings.min_sample_s, "work cannot be captured in a CUDA graph", during)
    try:
        return graph_sampler(fn, settings.min_sample_s, during, settings.kernel_time)
    except Exception as exc:  # noqa: BLE001 - capture refused (host sync, unsupported op): time eagerly
        torch.cuda.synchronize()
        return eager_sampler(
            fn, settings.min_sample_s, f"graph capture failed: {type(exc).__name__}: {exc}"[:REASON_CHARS], during
        )
