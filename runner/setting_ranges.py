"""The ranges a run's settings may take, in one place: `deepbench-run` refuses a value outside them
at the door (option_types' converters are built from these), `deepbench check` refuses a bundle
whose plan holds one, and `verify --local` never runs one (issue 42: a bundle's `min_time_s: 1e6`
or `threads: 100000` passed the checker and kept the verifier busy for nothing).

Fields the command line sets only through a mode (--fast, --rigorous) range from the smallest to
the largest value of the modes' presets (runner/launch/running/modes.py): what some version of a preset
can have made, never more."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..kernels.backends import declared
from ..kernels.results import MAX_SEED, Settings
from .launch.running.modes import MODES

MAX_KERNEL_TIMEOUT_S = 7 * 24 * 3600.0  # a week: anything longer is a typo, and overflows some timers
MAX_TIME_CAP_S = 24 * 3600.0
MAX_WARM_UP_S = 3600.0
MAX_ENERGY_WINDOW_S = 60.0  # per part: a longer window is a typo (a suite would take hours more)
MAX_LOCK_MHZ = 10_000  # no GPU clocks its SMs above this
MAX_MIN_SAMPLE_S = 1.0  # --min-sample: a longer sample is a typo (the default time cap is 1 s per direction)
# The most ranks any backend's results can be checked on (a collective's exact sums: its declaration's max_ranks).
MAX_RANKS = max(d.max_ranks for d in declared().values())


@dataclass(frozen=True)
class Bound:
    """A closed range [low, high]; `low_open`: the low end itself is excluded."""

    low: float
    high: float
    low_open: bool = False

    def holds(self, value: float) -> bool:
        return (
            math.isfinite(value) and (value > self.low if self.low_open else value >= self.low) and value <= self.high
        )

    def text(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"


def _preset_bound(field: str) -> Bound:
    values = [
        float(p.get(field, Settings.model_fields[field].default))  # type: ignore[arg-type]
        for p in MODES.values()
    ]
    low = min(values)
    # A preset of 0 for a floor means "none" (e.g. --fast's min_time_s); a positive floor is a floor.
    return Bound(0.0 if low == 0 else low, max(values))


# Settings field -> its range (threads: also at most the CPUs of the machine that runs it; see below).
RANGES: dict[str, Bound] = {
    "time_cap_s": Bound(0, MAX_TIME_CAP_S, low_open=True),
    "warm_up_s": Bound(0, MAX_WARM_UP_S),
    "target_rel_precision": Bound(0, 1, low_open=True),
    "kernel_timeout_s": Bound(0, MAX_KERNEL_TIMEOUT_S, low_open=True),
    "seed": Bound(0, MAX_SEED),
    "ranks": Bound(1, MAX_RANKS),
    "energy_window_s": Bound(0, MAX_ENERGY_WINDOW_S, low_open=True),
    "min_sample_s": Bound(0, MAX_MIN_SAMPLE_S, low_open=True),
    **{f: _preset_bound(f) for f in ("min_samples", "max_samples", "min_time_s", "limited_min_time_s")},
}


def out_of_range(settings: Settings, cpus: int | None = None) -> list[str]:
    """What in `settings` lies outside the ranges (each as one phrase); `cpus`: the CPUs of the
    machine the settings are for (threads above them are refused)."""
    out = [
        f"{name} {getattr(settings, name):g} is outside {bound.text()}"
        for name, bound in RANGES.items()
        if not bound.holds(float(getattr(settings, name)))
    ]
    if settings.threads is not None and (settings.threads < 1 or (cpus is not None and settings.threads > cpus)):
        out.append(f"threads {settings.threads} is outside [1, {cpus}] (the CPUs of the machine that runs it)")
    if settings.time_cap_s >= settings.kernel_timeout_s:
        out.append(f"time_cap_s {settings.time_cap_s:g} is not below kernel_timeout_s {settings.kernel_timeout_s:g}")
    if isinstance(settings.lock_clocks, int) and not 1 <= settings.lock_clocks <= MAX_LOCK_MHZ:
        out.append(f"lock_clocks {settings.lock_clocks} is outside [1, {MAX_LOCK_MHZ}] MHz")
    if settings.min_samples > settings.max_samples:
        out.append(f"min_samples {settings.min_samples} is above max_samples {settings.max_samples}")
    return out
