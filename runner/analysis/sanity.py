"""Figures that cannot be true as they stand, flagged with their likely cause.

Derived on the host from what every run already records (results, ceilings, device facts), so
that committed runs are checked the same way as new ones whenever they are shown:

- above-peak: a kernel above 100% of its measured ceiling. A memory-bound kernel whose bytes fit
  the device's last-level cache reads them from the cache on every call but the first, while the
  bandwidth ceiling is a copy far larger than the cache (DRAM); otherwise the ceiling was
  measured too low (a clock or power state at that moment) or the library found a faster path
  for this shape than for the ceiling's GEMM.
- one-rank: a collective on one rank moves nothing across a link: a bandwidth for it means
  nothing (NCCL's in-place all-reduce on one rank returns at once), so none is reported.
- slow-twin: an all-reduce direction far slower than its twin (out of place against in place)
  beyond what the extra copy costs: something other than the collective took the time.
- trend: a time that breaks the monotonic trend of its family: the kernels of one operation,
  precision and direction whose parameters are all equal but one number that grows with the work
  (a batch, a size). A smaller member slower than a larger one by more than TREND_MARGIN, and
  beyond both members' noise (its 25th percentile above the other's 75th), is flagged: less work
  in more time is a state of the machine or a choice of the library, not the kernel's cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from deepbench.kernels.catalog import traits_of

if TYPE_CHECKING:
    from .sources import Entry, Source

ABOVE_PEAK, ONE_RANK, SLOW_TWIN, TREND = "above-peak", "one-rank", "slow-twin", "trend"
# A smaller member of a family is flagged when its time exceeds a larger member's by more than this.
TREND_MARGIN = 0.10
QUARTILES = (25, 75)
MIN_SAMPLES = 3  # fewer: the figure's own spread is taken as its rounding (a published time)
HALF_US = 0.5
PEAK_PCT = 100.0
# Out of place is a copy plus the in-place call: flagged when it exceeds in place by more than
# this many times the larger of the in-place time and the copy's time at the measured bandwidth.
SLOW_TWIN_RATIO = 10.0
MB = 1e6
US = 1e-6
GB = 1e9
COPY_FACTOR = 2.0  # a copy reads and writes every byte (as the bandwidth ceilings count it)


@dataclass(frozen=True)
class Flag:
    """`reason`: the whole explanation (a table's notes); `cause`: its few words, where a summary names
    it beside the figure it explains (the HTML report's first screen); the reason where none is shorter."""

    name: str
    reason: str
    cause: str = ""

    @property
    def short(self) -> str:
        return self.cause or self.reason


@dataclass(frozen=True)
class Context:
    """What the flags need from their source besides the entry."""

    ceilings: dict[str, float]
    cache_bytes: float | None = None
    cache_name: str = "cache"
    # (kernel id, precision) -> why its time breaks its family's trend (trend_breaks)
    trend: dict[tuple[str, str], str] = field(default_factory=dict)


def context_of(source: Source) -> Context:
    """The source's ceilings, its device's last-level cache (GPU L2, CPU LLC) where recorded, and
    the kernels whose time breaks their family's trend."""
    trend = trend_breaks(source.entries)
    for key, name in (("device.l2_bytes", "L2"), ("device.llc_bytes", "last-level cache")):
        try:
            size = float(source.specs.get(key, "") or 0)
        except ValueError:
            size = 0.0
        if size > 0:
            return Context(source.ceilings, size, name, trend)
    return Context(source.ceilings, trend=trend)


def _work(e: Entry, direction: str) -> float:
    """What a direction does: its FLOPs, or its fewest bytes for what is rated in bytes."""
    from deepbench.kernels.precision import Precision

    k = e.kernel
    if direction not in k.DIRECTIONS:
        return 0.0
    flops = k.flops(direction)
    if flops:
        return flops
    try:
        return k.min_bytes(direction, Precision(e.precision))
    except ValueError:
        return 0.0


def _spread(e: Entry, direction: str) -> tuple[float, float]:
    """The direction's 25th and 75th percentiles (a published figure: its rounding)."""
    xs = e.part_samples.get(direction, ())
    if len(xs) >= MIN_SAMPLES:
        low, high = np.percentile(xs, QUARTILES)
        return float(low), float(high)
    t = e.parts_us[direction]
    return t - HALF_US, t + HALF_US


def trend_breaks(entries: Iterable[Entry]) -> dict[tuple[str, str], str]:
    """(kernel id, precision) -> the reason, for every kernel slower than a larger member of one of
    its families (see the module's docstring) beyond both members' noise."""
    families: dict[tuple, list[tuple[float, Entry]]] = {}
    for e in entries:
        if not e.ok:
            continue
        params = e.kernel.params()
        for name, value in params.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            rest = tuple((k, v) for k, v in params.items() if k != name)
            families.setdefault((e.kernel.op, e.precision, name, rest), []).append((value, e))
    out: dict[tuple[str, str], str] = {}
    for (_, _, name, _), members in families.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[0])
        for i, (value, small) in enumerate(members):
            for big_value, big in members[i + 1 :]:
                if big_value <= value:
                    continue
                for d in small.parts_us:
                    if d not in big.parts_us or _work(big, d) <= _work(small, d):
                        continue
                    t_small, t_big = small.parts_us[d], big.parts_us[d]
                    if t_small > t_big * (1 + TREND_MARGIN) and _spread(small, d)[0] > _spread(big, d)[1]:
                        key = (small.kernel.id, small.precision)
                        out.setdefault(
                            key,
                            (
                                f"{d} {t_small:,.0f} us at {name}={value} is slower than at {name}={big_value} "
                                f"({t_big:,.0f} us, more work), beyond both times' noise: a state of the machine "
                                "or a library's choice for this shape, not the kernel's cost"
                            ),
                        )
    return out


def one_rank(entry: Entry) -> bool:
    return traits_of(entry.kernel.op).collective and entry.extra.get("ranks") == 1


def flags(entry: Entry, ctx: Context) -> tuple[Flag, ...]:
    from .roofline import bandwidth, roof

    out: list[Flag] = []
    if not entry.ok:
        return ()
    if one_rank(entry):
        out.append(
            Flag(
                ONE_RANK,
                "one rank: no data crosses a link, so no bandwidth is reported (the time is the library's local cost)",
            )
        )
    r = roof(entry, ctx.ceilings)
    if r is not None and r.pct_of_peak > PEAK_PCT:
        out.append(Flag(ABOVE_PEAK, *_above_peak_reason(entry, r.bound, ctx)))
    trend = ctx.trend.get((entry.kernel.id, entry.precision))
    if trend:
        out.append(Flag(TREND, trend))
    twin = entry.extra.get("out_of_place_us")
    if twin and entry.median_us:
        bw = bandwidth(ctx.ceilings)
        copy_us = COPY_FACTOR * entry.min_bytes / (bw * GB) / US if bw else 0.0
        if twin - entry.median_us > SLOW_TWIN_RATIO * max(entry.median_us, copy_us):
            out.append(
                Flag(
                    SLOW_TWIN,
                    f"out of place {twin / entry.median_us:,.0f}x the in-place time, far beyond "
                    "its extra copy: the time went elsewhere (on a CPU, threads of a busy machine "
                    "or of the copy delay the library's worker: see the run's system noise)",
                )
            )
    return tuple(out)


def _above_peak_reason(entry: Entry, bound: str, ctx: Context) -> tuple[str, str]:
    """Why a kernel is above its ceiling, whole and in a few words."""
    if bound == "memory":
        if ctx.cache_bytes and entry.min_bytes <= ctx.cache_bytes:
            cache = f"{ctx.cache_bytes / MB:,.0f} MB {ctx.cache_name}"
            return (
                f"above the measured bandwidth: its data fit the {cache} and stay there between calls, while the "
                "ceiling is a copy from memory",
                f"memory-bound, its data fit the {cache} (the bandwidth ceiling copies from memory)",
            )
        return (
            "above the measured bandwidth: the copy ceiling was measured too low, or the kernel moves "
            "fewer bytes than its fewest-bytes count (operands reused from cache)",
            "memory-bound: the copy ceiling was measured low, or operands are reused from cache",
        )
    return (
        f"above the measured {entry.precision} compute ceiling: the ceiling's GEMM ran slower than this "
        "shape (measured too low in a clock or power state of that moment, or a faster algorithm here)",
        f"compute-bound: the {entry.precision} GEMM ceiling was measured low, or this shape ran a faster algorithm",
    )
