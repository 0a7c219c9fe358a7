"""A collective's table, as DeepBench showed all-reduce (size, ranks, time) with nccl-tests' bandwidths.

Columns: set, floats (the kernel's size), bytes (nccl-tests' size on these ranks), ranks, the library,
how the calls were timed (CUDA graph replays or eager calls), then per direction (in place, out of
place; blank where the collective has no in-place form) the median time per call over samples (each
sample the slowest rank's: the figure every other view shows) and the slowest rank's mean, named as a
mean, the algorithm bandwidth S/t and the bus bandwidth S/t * the collective's factor (GB/s, from the
median; see
kernels/backends/collectives/common.py); on one rank no bandwidth (nothing crosses a link)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from deepbench.kernels.backends.collectives.declaration import CollectiveInfo, CollectivePartInfo
from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.catalog import traits_of
from deepbench.kernels.results import KernelResult, Status

HEADERS = [
    "set",
    "floats",
    "bytes",
    "ranks",
    "library",
    "timing",
    "in-place median (us)",
    "in-place slowest rank mean (us)",
    "in-place algbw GB/s",
    "in-place busbw GB/s",
    "out-of-place median (us)",
    "out-of-place slowest rank mean (us)",
    "out-of-place algbw GB/s",
    "out-of-place busbw GB/s",
    "status",
]
# What a narrow terminal leaves out first (runner/render/tables.py Table.droppable).
DROP_ORDER = (
    "set",
    "timing",
    "bytes",
    "library",
    "out-of-place algbw GB/s",
    "in-place algbw GB/s",
    "out-of-place slowest rank mean (us)",
    "in-place slowest rank mean (us)",
    "out-of-place busbw GB/s",
)


def _figures(
    direction: tuple[float | None, CollectivePartInfo | None] | None, fmt_us, fmt_num, ranks: Any
) -> list[str]:
    """The median time, the slowest rank's mean, then the bandwidths: none on one rank, where
    nothing crosses a link (runner/analysis/sanity.py)."""
    median, info = direction or (None, None)
    if info is None:
        return ["", "", "", ""]
    times = [fmt_us(median), fmt_us(info.time_max_over_ranks_us)]
    if ranks == 1:
        return [*times, "", ""]
    return [*times, fmt_num(info.algbw_gbps), fmt_num(info.busbw_gbps)]


def _directions(
    r: KernelResult, info: CollectiveInfo | None
) -> dict[str, tuple[float | None, CollectivePartInfo | None]]:
    """The median time and the info of each measured direction: the kernel's part(s), and the
    out-of-place twin measured beside an in-place part (info.out_of_place)."""
    if r.status is not Status.OK:
        return {}
    found: dict[str, tuple[float | None, CollectivePartInfo | None]] = {
        p.direction: (p.measurement.stats.median, _part(p.info)) for p in r.parts
    }
    twin = info.twin if info else None
    if twin is not None:
        found[twin.direction] = (twin.median, _part(twin.info))
    return found


def _part(info: dict[str, Any]) -> CollectivePartInfo | None:
    """A direction's info (None where it has none: nothing to show)."""
    return info_of(CollectivePartInfo, info) if info else None


def collective_rows(
    results: Iterable[KernelResult], set_short: dict[str, str], status, fmt_us, fmt_num
) -> list[list[str]]:
    rows = []
    for r in results:
        if not traits_of(r.op).collective:
            continue
        info = info_of(CollectiveInfo, r.info)
        found = _directions(r, info)
        ranks: Any = info.ranks if info and info.ranks is not None else ""
        nbytes = info.bytes if info else None
        rows.append(
            [
                set_short.get(r.set, r.set),
                str(r.kernel.floats),
                f"{nbytes:,}" if nbytes else "",
                str(ranks),
                info.library_name(r.backend) if info else r.backend,
                info.timing if info else "",
                *_figures(found.get("in_place"), fmt_us, fmt_num, ranks),
                *_figures(found.get("out_of_place"), fmt_us, fmt_num, ranks),
                status(r),
            ]
        )
    return rows
