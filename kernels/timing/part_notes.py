"""The typed notes the timers add to a part's `info`, which `finish` and the reports read through
`info_of` instead of by key (the JSON keeps the keys the timers write).

Two writers, one model each, so that a note of an unexpected shape spoils only its own group:
- `TimerNotes`: what the GPU timer (cuda.py) says of its samples (kept throttled, the clock fell,
  the profiler's cross-check); the board's throttle watch (backends/cpu/throttling.py) marks kept
  throttled samples with the same key;
- `RooflineInfo`: the part's roofline bound, which the GPU measuring step
  (backends/gpu/cuda/device.py) records from backends/gpu/cuda/facts.py's `roofline`.

Light on purpose (pydantic only): the host's reports import it, and never torch."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..backends.contract.declaration import PartInfo


class ClockFell(BaseModel):
    """The SM clock fell while sampled (settling.py's `clock_fell`): from, to, how many low readings,
    and NVML's reasons at them."""

    model_config = ConfigDict(frozen=True, extra="allow")
    from_mhz: int | float | None = None
    to_mhz: int | float | None = None
    readings: int = 0
    reasons: list[str] = []

    def recorded(self) -> dict[str, object]:
        """As the result recorded it (the keys it had, in their order), for a report entry."""
        return self.model_dump(exclude_unset=True)


class ProfilerCheck(BaseModel):
    """--verify-timing's cross-check (profiler_check.py): whether harness and profiler agree."""

    model_config = ConfigDict(frozen=True, extra="allow")
    agrees: bool | None = None


class CalmFloor(BaseModel):
    """Every clock reading of the part's stretch was calm (settling.calm): the floor followed the samples'
    spread (stopping.spread_floor): the seconds it asked, the whole floor, and the seconds sampled."""

    model_config = ConfigDict(frozen=True, extra="allow")
    floor_s: float = 0.0
    min_time_s: float = 0.0
    stretch_s: float = 0.0


class TimerNotes(PartInfo):
    """What the timer says of a part's samples."""

    # a count from the GPU timer, True from the board's throttle watch
    throttled_samples_kept: bool | int = False
    clock_fell: ClockFell | None = None
    profiler: ProfilerCheck | None = None
    calm_floor: CalmFloor | None = None

    @property
    def timing_disagrees(self) -> bool:
        """--verify-timing found harness and profiler apart beyond its tolerance."""
        return self.profiler is not None and self.profiler.agrees is False


class Roofline(BaseModel):
    """The part's bound (compute or memory), its time at the measured ceiling, and the share of it
    the part reached."""

    model_config = ConfigDict(frozen=True, extra="allow")
    bound: str = ""
    bound_us: float | None = None
    pct_of_peak: float | None = None


class RooflineInfo(PartInfo):
    """The roofline the GPU measuring step recorded for a part (none on CPUs and collectives)."""

    roofline: Roofline | None = None
