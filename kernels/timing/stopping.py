"""When to stop taking samples: relative noise reached, a time cap, or a sample cap.

The noise criterion is the half-width of the ~95% confidence interval of the median, taken from
the box-plot notch (McGill, Tukey and Larsen 1978): 1.57 * IQR / sqrt(n). Divided by the median
it is the relative precision of the figure we report; it shrinks as samples accumulate, so a
noisy kernel still converges given time, and the time cap bounds what it may take (then the
result is flagged `unconverged`).

A minimum measuring time (nvbench's --min-time) keeps a figure from converging on the first few
milliseconds: a large GEMM's first samples run before the GPU's power limiter has settled, and a
median over a longer stretch is what a second run reproduces. Under the power limiter the clock
swings by 10-20% over hundreds of milliseconds (H100, large half-precision GEMMs): medians over
0.3 s windows of one steady stretch differed by up to 8%, over 1 s by under 2%
(tests/benchmarks/results/settle-h100.json), so such kernels get a longer minimum."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

NOTCH_FACTOR = 1.57  # 95% CI of the median from the IQR (McGill et al. 1978)

CONVERGED = "converged"
TIME_CAP = "time-cap"
MAX_SAMPLES = "max-samples"


def relative_precision(samples: Sequence[float]) -> float:
    """Half-width of the median's 95% CI over the median (inf with fewer than 2 samples)."""
    if len(samples) < 2:
        return math.inf
    q1, med, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    return NOTCH_FACTOR * (q3 - q1) / math.sqrt(len(samples)) / med


@dataclass(frozen=True)
class StopRule:
    target_rel_precision: float
    min_samples: int
    max_samples: int
    time_cap_s: float
    min_time_s: float = 0.0
    limited_min_time_s: float = 0.0

    def decide(self, samples: Sequence[float], elapsed_s: float, limited: bool = False) -> str | None:
        """The reason to stop now, or None to take another sample. `limited`: the power limiter
        holds the clock (settling.power_limited), and `limited_min_time_s` applies."""
        n = len(samples)
        if n >= self.max_samples:
            return MAX_SAMPLES
        min_time = max(self.min_time_s, self.limited_min_time_s) if limited else self.min_time_s
        if (n >= self.min_samples and elapsed_s >= min_time
                and relative_precision(samples) <= self.target_rel_precision):
            return CONVERGED
        if n >= self.min_samples and elapsed_s >= self.time_cap_s:
            return TIME_CAP
        # Never run past twice the cap, even below min_samples (a very slow kernel).
        if n >= 1 and elapsed_s >= 2 * self.time_cap_s:
            return TIME_CAP
        return None
