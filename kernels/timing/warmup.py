"""Bring a GPU to its working temperature before the first measurement.

Under the power limiter a GPU's clock depends on its temperature: a hotter chip leaks more, and
of the same power budget less is left for switching. A run that starts on a cold GPU measures
its first power-limited kernels faster than a second run does on the GPU the first one heated.
So before the first measurement a large GEMM runs until the temperature has risen less than
WARM_RISE_C over the last WARM_WINDOW_S (or for the time given, where NVML cannot read the
temperature), at most `max_s` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

WARM_GEMM = 8192  # fp16 8192^3: milliseconds a call, enough to hold a GPU at its power limit
WARM_STEP_S = 0.5  # GEMMs enqueued between two temperature readings
WARM_WINDOW_S = 10.0  # the temperature settles when it rose less than WARM_RISE_C over this
WARM_RISE_C = 1.0


def settled(temps: list[tuple[float, float]], window_s: float = WARM_WINDOW_S, rise_c: float = WARM_RISE_C) -> bool:
    """Whether (seconds, degrees C) readings rose less than `rise_c` over the last `window_s`."""
    if not temps or temps[-1][0] - temps[0][0] < window_s:
        return False
    now, last = temps[-1]
    before = [c for t, c in temps if t <= now - window_s][-1]
    return last - before < rise_c


def _nothing() -> None:
    """Default for `meanwhile`."""


def warm_up(
    device: torch.device,
    temperature: Callable[[], float | None],
    max_s: float,
    now: Callable[[], float] = time.perf_counter,
    meanwhile: Callable[[], None] = _nothing,
) -> dict[str, Any]:
    """Run fp16 GEMMs until the temperature settles or `max_s` passes; what it did, for the record.
    `meanwhile` runs once on the host after the first GEMMs are enqueued (CUPTI's seconds-long first
    start, with kernel time): its time counts towards `max_s` instead of delaying the first kernel."""
    a = torch.randn(WARM_GEMM, WARM_GEMM, device=device, dtype=torch.float16)
    b = torch.randn(WARM_GEMM, WARM_GEMM, device=device, dtype=torch.float16)
    out = torch.empty_like(a)
    torch.mm(a, b, out=out)
    torch.cuda.synchronize(device)
    start = now()
    first = temperature()
    temps: list[tuple[float, float]] = [(0.0, first)] if first is not None else []
    calls, elapsed = 1, 0.0
    while elapsed < max_s:
        t0 = now()
        for _ in range(calls):
            torch.mm(a, b, out=out)
        meanwhile()
        meanwhile = _nothing
        torch.cuda.synchronize(device)
        if now() - t0 < WARM_STEP_S / 2:
            calls *= 2  # calibrate towards WARM_STEP_S per reading
        elapsed = now() - start
        reading = temperature()
        if reading is not None:
            temps.append((elapsed, reading))
            if settled(temps):
                break
    del a, b, out
    torch.cuda.empty_cache()
    return {
        "seconds": round(elapsed, 1),
        "temp_c_start": first,
        "temp_c_end": temps[-1][1] if temps else None,
        "settled": settled(temps),
    }
