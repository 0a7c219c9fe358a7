"""The flags a result carries that follow from its measurements alone, derived in one place with their
thresholds: the harness sets them (harness/execute.py) and `deepbench check` re-derives them from the
samples a bundle holds (runner/submission/checker.py), so the two can never disagree on a threshold."""

from __future__ import annotations

from collections.abc import Iterable

from .noise import contended
from .results import Measurement
from .timing.stopping import CONVERGED

NOISY_REL_IQR = 0.10  # flag a kernel whose interquartile range exceeds 10% of its median


def measured_flags(measurements: Iterable[Measurement]) -> dict[str, bool]:
    """Whether each measurement-borne flag is due for a result of these measurements (its parts'):
    unconverged (a part stopped before its median was known to the target), noisy (a part's IQR over
    NOISY_REL_IQR of its median), contended (other processes held CPUs its threads used)."""
    ms = list(measurements)
    return {
        "unconverged": any(m.stop_reason != CONVERGED for m in ms),
        "noisy": any(m.stats.rel_iqr > NOISY_REL_IQR for m in ms),
        "contended": any(contended(m.others_cores, m.spare_cores) for m in ms),
    }
