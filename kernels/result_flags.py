"""The flags a result carries, derived in one place with their thresholds: the harness sets them
(harness/execute.py `finish`) and `deepbench check` re-derives them from what a bundle holds
(runner/submission/result_checks.py), so the two can never disagree on a threshold.

Each follows from a part's measurement or from what its timer noted of its samples (`TimerNotes`):
- unconverged: a part stopped before its median was known to the target (its stop reason);
- noisy: a part's IQR over NOISY_REL_IQR of its median (its statistics);
- throttled: samples taken while the GPU was throttled were dropped, or kept where too few remained;
- clock-fell: the SM clock fell while a part was sampled (the timer's note names NVML's reasons);
- contended: other processes held CPUs its threads used (the measurement's others_cores and spare_cores);
- timing-disagrees: --verify-timing's profiler and the harness differ;
- stalled: a sample was taken while the process stood still (kernels/stalls.py), left out of the statistics.
What a bundle cannot prove is the testimony they follow from (a clock reading, /proc/stat's busy time):
the checker holds the flags to it, and re-derives the rest from the samples."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .backends.contract.declaration import info_of
from .noise import contended
from .results import Measurement
from .timing.part_notes import TimerNotes
from .timing.stopping import CONVERGED

NOISY_REL_IQR = 0.10  # flag a kernel whose interquartile range exceeds 10% of its median
# The order the flags are written in (what `finish` always wrote, the newest last).
FLAG_ORDER = ("unconverged", "noisy", "throttled", "clock-fell", "contended", "timing-disagrees", "stalled")


def measured_flags(measurements: Iterable[Measurement]) -> dict[str, bool]:
    """Whether each flag that follows from the measurements alone is due for a result of these
    measurements (its parts'): unconverged, noisy, contended, stalled."""
    ms = list(measurements)
    return {
        "unconverged": any(m.stop_reason != CONVERGED for m in ms),
        "noisy": any(m.stats.rel_iqr > NOISY_REL_IQR for m in ms),
        "contended": any(contended(m.others_cores, m.spare_cores) for m in ms),
        "stalled": any(m.stalled for m in ms),
    }


def noted_flags(measurements: Iterable[Measurement], infos: Iterable[dict[str, Any]]) -> dict[str, bool]:
    """Whether each flag that follows from the timer's notes is due (the parts' measurements and info,
    in the same order): throttled, clock-fell, timing-disagrees."""
    ms = list(measurements)
    notes = [info_of(TimerNotes, info) or TimerNotes() for info in infos]
    return {
        "throttled": any(m.discarded for m in ms) or any(n.throttled_samples_kept for n in notes),
        "clock-fell": any(n.clock_fell is not None for n in notes),
        "timing-disagrees": any(n.timing_disagrees for n in notes),
    }


def due_flags(parts: Iterable[Any]) -> tuple[str, ...]:
    """Every flag a result of these parts (each with `measurement` and `info`) carries, in FLAG_ORDER."""
    ps = list(parts)
    due = {
        **measured_flags(p.measurement for p in ps),
        **noted_flags((p.measurement for p in ps), (p.info for p in ps)),
    }
    return tuple(flag for flag in FLAG_ORDER if due[flag])
