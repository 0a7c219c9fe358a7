"""The GPU timer every CUDA operation shares: the strategy (strategy.py) turns a call into
samples, the shared loop takes them while reading the clock (clocked.py), throttled samples are
dropped where enough remain, and the notes record what the clocks, the strategy and, with
--verify-timing, the profiler (profiler_check.py) said."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

from ..results import Energy, Measurement, Settings
from .clocked import Sampling, run_samples, select_unthrottled
from .clocks import ClockReader
from .energy import NoEnergy, measure_energy
from .events import US_PER_S
from .meters import Meter
from .profiler_check import verify
from .sampler import Sampler
from .settling import ClockReading, clock_fell
from .stopping import StopRule, spread_floor
from .strategy import sampler_for


def measure(
    fn: Callable[[], object],
    rule: StopRule,
    settings: Settings,
    capturable: bool,
    device: torch.device,
    clocks: ClockReader,
    meter: Meter | str | None = None,
) -> tuple[Measurement, dict[str, Any]]:
    """Time `fn` on the GPU; returns the measurement and notes for the part's info (with the
    profiler's figures beside it when `settings.verify_timing`; with --energy, the part's energy
    read from `meter` after the samples, or why not)."""
    reading = [ClockReading()]

    def during() -> None:
        reading[0] = clocks.reading()

    sampler = sampler_for(fn, settings, capturable, device, during)
    got = run_samples(sampler, rule, lambda: reading[0], reference=lambda: clocks.max_seen)
    kept, kept_clocks, discarded, throttled_kept = select_unthrottled(
        got.samples, [r.mhz for r in got.readings], got.low, rule.min_samples
    )
    notes = dict(sampler.notes)
    active = clocks.throttle_reasons()
    if active:
        notes["nvml_clock_event_reasons"] = active
    if throttled_kept:
        notes["throttled_samples_kept"] = throttled_kept
    capped = sum(r.power_capped for r in got.readings)
    if capped:
        notes["power_capped_samples"] = capped
    fell = clock_fell(got.readings)
    if fell:  # flagged clock-fell, with NVML's reasons at the low readings
        notes["clock_fell"] = fell
    if got.settle_samples:
        notes["clock_settle"] = {"samples_left_out": got.settle_samples, "seconds": round(got.settle_s, 3)}
    if got.calm and rule.calm_min_time_s is not None:  # the floor followed the spread (stopping.spread_floor)
        notes["calm_floor"] = calm_floor(rule, got)
    if clocks.max_seen:
        notes["sm_clock_reference_mhz"] = clocks.max_seen
    temperature = clocks.temperature_c()
    if temperature is not None:
        notes["gpu_temp_c"] = temperature
    energy = None
    if settings.energy:
        energy = _energy(sampler, fn, statistics.median(kept), meter or "no meter was opened", settings, notes)
    m = Measurement.of(
        kept,
        method=sampler.method,
        calls_per_sample=sampler.calls,
        warmup_calls=sampler.warmup_calls,
        stop_reason=got.reason,
        target_rel_precision=rule.target_rel_precision,
        discarded=discarded,
        clocks_mhz=tuple(kept_clocks),
        mem_clock_mhz=clocks.mem_mhz(),
        energy=energy,
    )
    if settings.verify_timing and sampler.replay is not None:
        notes["profiler"] = verify(sampler, m.stats.median, m.stats.n * m.stats.median * sampler.calls / US_PER_S)
    return m, notes


def calm_floor(rule: StopRule, got: Sampling) -> dict[str, float]:
    """What the floor was for a stretch whose every reading was calm: the seconds it asked, against the
    whole min_time_s, and the seconds the stretch took."""
    floor = spread_floor(got.samples, rule.min_time_s, rule.calm_min_time_s or 0.0)
    return {"floor_s": round(floor, 4), "min_time_s": rule.min_time_s, "stretch_s": round(got.stretch_s, 4)}


def _energy(
    sampler: Sampler,
    fn: Callable[[], object],
    median_us: float,
    meter: Meter | str,
    settings: Settings,
    notes: dict[str, Any],
) -> Energy | None:
    """The part's energy over back-to-back replays of what was timed (energy.py); None, with the
    reason in the notes, where the meter gives none."""
    if isinstance(meter, str):
        notes["energy_error"] = meter
        return None
    run, calls = (sampler.replay, sampler.replay_calls) if sampler.replay is not None else (fn, 1)

    def start() -> Callable[[], bool]:
        run()
        done = torch.cuda.Event()
        done.record()
        return done.query

    note = "warm calls: the energy loop does not flush the L2 between calls" if settings.cold else ""
    try:
        return measure_energy(
            start,
            calls,
            calls * median_us / US_PER_S,
            meter,
            settings.energy_window_s,
            drain=torch.cuda.synchronize,
            note=note,
        )
    except NoEnergy as exc:
        notes["energy_error"] = str(exc)
        return None
