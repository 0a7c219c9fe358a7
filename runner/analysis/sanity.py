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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepbench.kernels.catalog import traits_of

if TYPE_CHECKING:
    from .sources import Entry, Source

ABOVE_PEAK, ONE_RANK, SLOW_TWIN = "above-peak", "one-rank", "slow-twin"
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
    name: str
    reason: str


@dataclass(frozen=True)
class Context:
    """What the flags need from their source besides the entry."""

    ceilings: dict[str, float]
    cache_bytes: float | None = None
    cache_name: str = "cache"


def context_of(source: Source) -> Context:
    """The source's ceilings and its device's last-level cache (GPU L2, CPU LLC), where recorded."""
    for key, name in (("device.l2_bytes", "L2"), ("device.llc_bytes", "last-level cache")):
        try:
            size = float(source.specs.get(key, "") or 0)
        except ValueError:
            size = 0.0
        if size > 0:
            return Context(source.ceilings, size, name)
    return Context(source.ceilings)


def one_rank(entry: Entry) -> bool:
    return traits_of(entry.kernel.op).collective and entry.extra.get("ranks") == 1


def flags(entry: Entry, ctx: Context) -> tuple[Flag, ...]:
    from .roofline import bandwidth, roof

    out: list[Flag] = []
    if not entry.ok:
        return ()
    if one_rank(entry):
        out.append(Flag(ONE_RANK, "one rank: no data crosses a link, so no bandwidth is reported "
                                  "(the time is the library's local cost)"))
    r = roof(entry, ctx.ceilings)
    if r is not None and r.pct_of_peak > PEAK_PCT:
        out.append(Flag(ABOVE_PEAK, _above_peak_reason(entry, r.bound, ctx)))
    twin = entry.extra.get("out_of_place_us")
    if twin and entry.median_us:
        bw = bandwidth(ctx.ceilings)
        copy_us = COPY_FACTOR * entry.min_bytes / (bw * GB) / US if bw else 0.0
        if twin - entry.median_us > SLOW_TWIN_RATIO * max(entry.median_us, copy_us):
            out.append(Flag(SLOW_TWIN, f"out of place {twin / entry.median_us:,.0f}x the in-place time, far beyond "
                                       "its extra copy: the time went elsewhere (on a CPU, threads of a busy machine "
                                       "or of the copy delay the library's worker: see the run's system noise)"))
    return tuple(out)


def _above_peak_reason(entry: Entry, bound: str, ctx: Context) -> str:
    if bound == "memory":
        if ctx.cache_bytes and entry.min_bytes <= ctx.cache_bytes:
            return (f"above the measured bandwidth: its data fit the {ctx.cache_bytes / MB:,.0f} MB {ctx.cache_name} "
                    "and stay there between calls, while the ceiling is a copy from memory")
        return ("above the measured bandwidth: the copy ceiling was measured too low, or the kernel moves "
                "fewer bytes than its fewest-bytes count (operands reused from cache)")
    return (f"above the measured {entry.precision} compute ceiling: the ceiling's GEMM ran slower than this "
            "shape (measured too low in a clock or power state of that moment, or a faster algorithm here)")
