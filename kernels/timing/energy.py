"""A timed part's energy (--energy): a meter (meters.py) read around a loop of back-to-back calls,
run after the part's timed samples, so that timing is the same with or without it.

Why a loop of its own: an energy counter moves in steps (NVML's every few tens of milliseconds),
so a figure needs a window of many steps, far longer than most timed samples. The loop keeps the
device busy (on a GPU, a queue of graph replays, QUEUE_AHEAD_S deep) while the host polls the
meter, and takes the counter at its updates only: the first update seen is skipped (it may count
time before the loop began), the energy is what the counter added from the second update seen to
the last, and the loop ends once that spans MIN_UPDATES updates and the window asked for. Both ends
fall on updates the device was busy for, so the counter's step does not bias the figure. Watts are
that energy over that time; a call's joules are those watts times the loop's time per call.

A meter with power only (a Raspberry Pi 5's PMIC) is sampled instead and its samples integrated
(trapezoids). On a GPU the power reading (meters.py: NVML's instantaneous field where offered) is sampled as well and
integrated over the same window: a cross-check of the counter (tests/benchmarks/energy_vs_power.py).
Free of torch: the device's work comes in as callables, so the loop is tested with fakes.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results import Energy, Measurement
from .meters import Meter, cpu_meter

MIN_UPDATES = 10  # meter updates a window spans at least (its step is then under a tenth of it)
SKIPPED_UPDATES = 1  # the first update seen may count time before the loop
QUEUE_AHEAD_S = 0.02  # device work kept queued ahead of the host's polling (GPU)
MAX_QUEUED = 256  # chunks queued at most (a tiny eager call: launch queue's room)
MAX_WINDOW_S = 30.0  # a meter that has not updated enough by then gives no figure
PERIOD_PROBE_S = 1.0  # update_period's polling time
US_PER_S = 1e6


class NoEnergy(RuntimeError):
    """The meter gave no figure (it did not update, or stopped answering): the reason."""


# A chunk of device work is started and returns how to ask whether it has finished.
Chunk = Callable[[], Callable[[], bool]]


@dataclass(frozen=True)
class Window:
    """What the loop read: the meter's energy over its window, and the loop's calls and time."""

    joules: float
    window_s: float
    updates: int
    update_period_s: float | None
    calls: int
    loop_s: float
    sampled_joules: float | None
    power_samples: int


def integral(times: list[float], watts: list[float], start: float, end: float) -> float:
    """Joules of sampled power over [start, end] (trapezoids; the ends interpolated)."""
    ts = np.asarray(times)
    inside = ts[(ts > start) & (ts < end)]
    grid = np.concatenate(([start], inside, [end]))
    return float(np.trapezoid(np.interp(grid, ts, np.asarray(watts)), grid))


def _period(times: list[float]) -> float | None:
    return statistics.median(np.diff(times).tolist()) if len(times) > 1 else None


def run_loop(
    start_chunk: Chunk,
    chunk_calls: int,
    chunk_s: float,
    meter: Meter,
    min_window_s: float,
    now: Callable[[], float] = time.perf_counter,
    drain: Callable[[], None] = lambda: None,
    max_window_s: float = MAX_WINDOW_S,
    queue_ahead_s: float = QUEUE_AHEAD_S,
) -> Window:
    """Keep the device busy with chunks while reading the meter, until MIN_UPDATES updates (after
    the skipped ones) span at least `min_window_s`; see the module's docstring."""
    counter = meter.energy_j()
    if counter is None and meter.power_w() is None:
        raise NoEnergy(f"the {meter.name} meter gives neither energy nor power")
    depth = min(MAX_QUEUED, max(1, math.ceil(queue_ahead_s / max(chunk_s, 1e-9)) + 1))
    queued: deque[Callable[[], bool]] = deque()
    updates: list[tuple[float, float]] = []  # (time, counter) where it changed; power samples for a power meter
    power: list[tuple[float, float]] = []
    calls, last, start = 0, counter, now()
    while True:
        while len(queued) < depth:
            queued.append(start_chunk())
            calls += chunk_calls
        t = now()
        watts = meter.power_w()
        if watts is not None:
            power.append((t, watts))
        if counter is not None:
            value = meter.energy_j()
            if value is None:
                raise NoEnergy(f"the {meter.name} counter stopped answering")
            if value != last:
                updates.append((t, value))
                last = value
        elif watts is not None:
            updates.append((t, watts))
        while queued and queued[0]():
            queued.popleft()
        used = updates[SKIPPED_UPDATES:]
        if len(used) > MIN_UPDATES and used[-1][0] - used[0][0] >= min_window_s:
            break
        if t - start > max_window_s:
            drain()
            raise NoEnergy(
                f"the {meter.name} meter updated {len(updates)} times in {max_window_s:g} s "
                f"(a figure needs {MIN_UPDATES + SKIPPED_UPDATES + 1})"
            )
    drain()
    loop_s = now() - start
    (t0, v0), (t1, v1) = used[0], used[-1]
    if counter is not None:
        joules = v1 - v0
    else:
        times, watts_seen = zip(*used, strict=True)
        joules = integral(list(times), list(watts_seen), t0, t1)
    sampled = None
    if counter is not None and len(power) > 1:
        times, watts_seen = zip(*power, strict=True)
        sampled = integral(list(times), list(watts_seen), t0, t1)
    return Window(
        joules=joules,
        window_s=t1 - t0,
        updates=len(used) - 1,
        update_period_s=_period([u[0] for u in used]),
        calls=calls,
        loop_s=loop_s,
        sampled_joules=sampled,
        power_samples=len(power),
    )


def measure_energy(
    start_chunk: Chunk,
    chunk_calls: int,
    chunk_s: float,
    meter: Meter,
    min_window_s: float,
    now: Callable[[], float] = time.perf_counter,
    drain: Callable[[], None] = lambda: None,
    note: str = "",
    queue_ahead_s: float = QUEUE_AHEAD_S,
) -> Energy:
    """The part's Energy: the power state before, the loop, the power state after."""
    before = meter.state()
    limit = meter.power_limit_w()
    w = run_loop(start_chunk, chunk_calls, chunk_s, meter, min_window_s, now, drain, queue_ahead_s=queue_ahead_s)
    watts = w.joules / w.window_s
    loop_us = w.loop_s / w.calls * US_PER_S
    return Energy(
        meter=meter.name,
        joules=w.joules,
        window_s=w.window_s,
        watts=watts,
        calls=w.calls,
        loop_us_per_call=loop_us,
        joules_per_call=watts * loop_us / US_PER_S,
        updates=w.updates,
        update_period_s=w.update_period_s,
        sampled_joules=w.sampled_joules,
        power_samples=w.power_samples,
        power_reading=meter.power_reading,
        power_limit_w=limit,
        before=before,
        after=meter.state(),
        note=note,
    )


def update_period(
    meter: Meter,
    now: Callable[[], float] = time.perf_counter,
    probe_s: float = PERIOD_PROBE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """How often the meter's counter changes (median seconds between changes), polled for `probe_s`;
    None where it has no counter or did not change twice."""
    last = meter.energy_j()
    if last is None:
        return None
    changes: list[float] = []
    start = now()
    while now() - start < probe_s:
        value = meter.energy_j()
        if value is None:
            return None
        if value != last:
            changes.append(now())
            last = value
        sleep(0.0005)
    return _period(changes)


def synchronous(fn: Callable[[], object], calls: int) -> Chunk:
    """A CPU's chunk: `calls` calls run at once, finished when they return."""

    def start() -> Callable[[], bool]:
        for _ in range(calls):
            fn()
        return lambda: True

    return start


@functools.cache
def machine_meter() -> Meter | str:
    """This machine's CPU meter (meters.cpu_meter), opened once per process."""
    return cpu_meter()


def with_cpu_energy(
    measured: Measurement, fn: Callable[[], object], info: dict[str, Any], min_window_s: float
) -> Measurement:
    """A CPU part's measurement with its energy over sample-sized chunks of calls run back to back
    (the backends' --energy); where there is none, `info['energy_error']` says why."""
    meter = machine_meter()
    if isinstance(meter, str):
        info["energy_error"] = meter
        return measured
    calls = measured.calls_per_sample
    try:
        energy = measure_energy(
            synchronous(fn, calls),
            calls,
            calls * measured.stats.median / US_PER_S,
            meter,
            min_window_s,
            queue_ahead_s=0.0,
        )
    except NoEnergy as exc:
        info["energy_error"] = str(exc)
        return measured
    return measured.model_copy(update={"energy": energy})
