"""The GPU clock's say in a measurement: which samples were throttled, and where the steady
stretch begins. Pure decisions on NVML readings, so they are tested without a GPU.

Throttled (nvbench's rule, narrowed): a sample whose SM clock is below THROTTLE_FRACTION of the
highest clock seen, unless NVML names the software power cap as the only slowdown. Under a heavy
half-precision GEMM the power limiter holds the clock well below boost as its normal way of
running, and a training step runs at that clock too. Treated as throttled (dropped, with a rest
after each, as nvbench does), those samples gave the limiter its budget back and the next samples
a higher clock, and the figure depended on how many were dropped. Thermal and hardware slowdowns
(hw_slowdown, sw_thermal, hw_thermal, hw_power_brake) still are throttling: the samples are
dropped and the GPU rests.

Settling: after idle time (a correctness check, a graph capture, a profiler run) a heavy kernel
starts at full clock and the power limiter pulls the clock down a fraction of a second later;
after a heavy kernel a light one starts at a low clock that comes back up. The samples before the
clock's first move between the boost level (within BOOST_TOLERANCE of the highest clock seen) and
below it describe what ran before, not the kernel: they are left out, and the minimum measuring
time counts from the move. Only the first move counts; later ones are the limiter's own swing,
which the figure has to average over: while at least LIMITED_SHARE of a stretch's readings are
power_limited, the stopping rule's longer `limited_min_time_s` applies (stopping.py says why).
With these rules, the longer minimum under the limiter and the warm-up (warmup.py), two passes
over the same kernels agree far more often than with every low clock taken as throttled.

Calm: a reading where the limiter has nothing to act on, so no settling is under way: the clock at
boost, NVML naming no slowdown reason at all, and the board's instantaneous power under CALM_POWER_SHARE
of its enforced limit. A stretch of calm readings only lets the stopping rule's floor follow the
samples' spread (stopping.spread_floor); a reading that cannot say (no NVML, no instantaneous power
field, an unknown reason) is not calm, so such a GPU keeps the whole floor.
"""

from __future__ import annotations

from dataclasses import dataclass

# nvbench's default throttle threshold. A tighter one took the power limiter's ordinary dips for
# throttling: the rests that followed cooled the chip, and a second run disagreed.
THROTTLE_FRACTION = 0.75
BOOST_TOLERANCE = 0.02  # within 2% of the highest clock seen counts as boost (readings step by 15 MHz)
POWER_CAP = "sw_power_cap"
# A stretch counts as power-limited when this share of its readings is: a swinging limiter is
# what the longer minimum is for, and a majority rule missed half-limited stretches.
LIMITED_SHARE = 0.25
# A reading is calm below this share of the enforced power limit: the limiter acts near the limit, and the
# margin covers the instantaneous reading's swing and a chip that leaks more as it heats (warmup.py).
CALM_POWER_SHARE = 0.6


@dataclass(frozen=True)
class ClockReading:
    """One NVML reading taken while a sample ran: the SM clock, the active slowdown reasons and the
    board's instantaneous power over its enforced limit (each None where NVML is missing or did not
    answer)."""

    mhz: float | None = None
    reasons: tuple[str, ...] | None = None
    power_share: float | None = None

    @property
    def power_capped(self) -> bool:
        return self.reasons is not None and POWER_CAP in self.reasons


def throttled(reading: ClockReading, reference_mhz: float) -> bool:
    """A clock below THROTTLE_FRACTION of the reference, for a reason other than the power cap
    (or for an unknown reason)."""
    if reading.mhz is None or reference_mhz <= 0 or reading.mhz >= THROTTLE_FRACTION * reference_mhz:
        return False
    return reading.reasons is None or any(reason != POWER_CAP for reason in reading.reasons)


def at_boost(mhz: float, reference_mhz: float) -> bool:
    """The clock is at its boost level: within BOOST_TOLERANCE of the highest seen."""
    return mhz >= (1.0 - BOOST_TOLERANCE) * reference_mhz


def power_limited(reading: ClockReading, reference_mhz: float) -> bool:
    """The power limiter holds the clock below boost now (NVML keeps naming the power cap for a
    while after a heavy kernel, also at full clock: the clock has to be down too)."""
    return (
        reading.power_capped
        and reading.mhz is not None
        and reference_mhz > 0
        and not at_boost(reading.mhz, reference_mhz)
    )


def calm(reading: ClockReading, reference_mhz: float) -> bool:
    """The limiter has nothing to act on (see the module's docstring): at boost, no slowdown reason,
    the power under CALM_POWER_SHARE of the limit; False wherever a figure is missing."""
    return (
        reading.mhz is not None
        and reference_mhz > 0
        and at_boost(reading.mhz, reference_mhz)
        and reading.reasons == ()
        and reading.power_share is not None
        and reading.power_share < CALM_POWER_SHARE
    )


def stretch_limited(limited_readings: int, readings: int) -> bool:
    """At least LIMITED_SHARE of a stretch's readings are power_limited."""
    return readings > 0 and limited_readings >= LIMITED_SHARE * readings


@dataclass
class SettleWatch:
    """Watches one measurement's readings for the clock's first move between boost and below."""

    first_at_boost: bool | None = None
    moved: bool = False

    def observe(self, reading: ClockReading, reference_mhz: float) -> bool:
        """True exactly once: at the first reading whose boost state differs from the first one's."""
        if self.moved or reading.mhz is None or reference_mhz <= 0:
            return False
        boost = at_boost(reading.mhz, reference_mhz)
        if self.first_at_boost is None:
            self.first_at_boost = boost
        elif boost != self.first_at_boost:
            self.moved = True
        return self.moved


# The clock fell while a measurement sampled: its lowest reading this far below the stretch's first.
# The power limiter's ordinary swing under a heavy GEMM stays within a few percent of its level.
CLOCK_FELL_FRACTION = 0.05


def clock_fell(readings: list[ClockReading]) -> dict[str, object] | None:
    """Whether the SM clock fell during the sampled stretch, and NVML's reasons at the low readings
    (None: it held within CLOCK_FELL_FRACTION of its first reading, or was not read)."""
    seen = [r for r in readings if r.mhz is not None]
    if not seen:
        return None
    first = seen[0].mhz
    assert first is not None
    low = [r for r in seen if r.mhz is not None and r.mhz < (1 - CLOCK_FELL_FRACTION) * first]
    if not low:
        return None
    reasons = sorted({reason for r in low for reason in (r.reasons or ())})
    return {
        "from_mhz": first,
        "to_mhz": min(r.mhz for r in low if r.mhz is not None),
        "readings": len(low),
        "reasons": reasons,
    }
