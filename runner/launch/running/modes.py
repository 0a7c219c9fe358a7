"""The measurement modes (`deepbench-run --mode`): how long and how precisely each kernel is sampled.

Apart from the `deepbench-run` command because a submission's bundle and its checker read them too."""

from __future__ import annotations

from typing import TypedDict


class Preset(TypedDict, total=False):
    """A mode's Settings fields (a plain dict at run time)."""

    target_rel_precision: float
    min_samples: int
    max_samples: int
    time_cap_s: float
    min_sample_s: float
    min_time_s: float
    limited_min_time_s: float
    calm_min_time_s: float | None
    warm_up_s: float


# Measurement presets: (target relative precision of the median, min samples, max samples,
# time cap per direction in s, min seconds per sample, min seconds of samples before stopping on
# noise, the same while the GPU's power limiter holds the clock, GPU warm-up in s at most).
# Default: 0.2 s from the clock's first move, 1 s under the power limiter, 30 s warm-up; replayed on
# H100 series after a large GEMM and after idle, the 12 worst kernels' figures agreed within 2.1%
# (docs/evidence/timer-constants.md), and two passes over the 640 training GEMMs within 3% for 97.5%
# (tests/benchmarks/fidelity.py). Rigorous takes 1 s, twice nvbench's default 0.5 s. On a calm GPU (no slowdown,
# boost clock, power under 60% of the limit: kernels/timing/settling.py calm) the default's floor follows the
# samples' spread down to 0.02 s (kernels/timing/stopping.py spread_floor): 20 samples of 1 ms; rigorous keeps 1 s.
MODES: dict[str, Preset] = {
    "fast": Preset(
        target_rel_precision=0.05, min_samples=3, max_samples=200, time_cap_s=0.2, min_sample_s=0.0005, min_time_s=0.0
    ),
    "default": Preset(
        target_rel_precision=0.01,
        min_samples=5,
        max_samples=1000,
        time_cap_s=1.0,
        min_sample_s=0.001,
        min_time_s=0.2,
        limited_min_time_s=1.0,
        calm_min_time_s=0.02,
        warm_up_s=30.0,
    ),
    "rigorous": Preset(
        target_rel_precision=0.005,
        min_samples=20,
        max_samples=10000,
        time_cap_s=10.0,
        min_sample_s=0.005,
        min_time_s=1.0,
        limited_min_time_s=2.0,
        warm_up_s=120.0,
    ),
}
