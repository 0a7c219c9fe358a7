"""The all-reduce table, as DeepBench showed it (size, ranks, time) with nccl-tests' bandwidths.

Columns: set, floats (DeepBench's size), ranks, the library that reduced, then per direction
(in place, out of place) the time per call as the mean over ranks and the max over ranks, the
algorithm bandwidth S/t and the bus bandwidth S/t * 2(n-1)/n (GB/s, from the median time over
samples, each sample the slowest rank's; see kernels/backends/distributed/common.py); on one
rank no bandwidth (nothing crosses a link)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from deepbench.kernels.catalog import traits_of
from deepbench.kernels.results import KernelResult, Status

HEADERS = ["set", "floats", "ranks", "library",
           "in-place mean (us)", "in-place max (us)", "in-place algbw GB/s", "in-place busbw GB/s",
           "out-of-place mean (us)", "out-of-place max (us)", "out-of-place algbw GB/s", "out-of-place busbw GB/s",
           "status"]
# What a narrow terminal leaves out first (runner/render/tables.py Table.droppable).
DROP_ORDER = ("set", "library", "out-of-place algbw GB/s", "in-place algbw GB/s", "out-of-place max (us)",
              "in-place max (us)", "out-of-place busbw GB/s")


def _figures(info: dict[str, Any] | None, fmt_us, fmt_num, ranks: Any) -> list[str]:
    """Mean and max time over ranks, then the bandwidths: none on one rank, where nothing
    crosses a link (runner/analysis/sanity.py)."""
    if not info:
        return ["", "", "", ""]
    times = [fmt_us(info.get("time_mean_over_ranks_us")), fmt_us(info.get("time_max_over_ranks_us"))]
    if ranks == 1:
        return [*times, "", ""]
    return [*times, fmt_num(info.get("algbw_gbps")), fmt_num(info.get("busbw_gbps"))]


def all_reduce_rows(results: Iterable[KernelResult], set_short: dict[str, str], status, fmt_us, fmt_num
                    ) -> list[list[str]]:
    rows = []
    for r in results:
        if not traits_of(r.op).collective:
            continue
        in_place = r.parts[0].info if r.status is Status.OK and r.parts else None
        out = r.info.get("out_of_place", {}).get("info") if r.status is Status.OK else None
        library = r.info.get("library")
        library = library.get("collective_library", r.backend) if isinstance(library, dict) else (library or r.backend)
        ranks = r.info.get("ranks", "")
        rows.append([set_short.get(r.set, r.set), str(r.kernel.floats), str(ranks), str(library),
                     *_figures(in_place, fmt_us, fmt_num, ranks), *_figures(out, fmt_us, fmt_num, ranks), status(r)])
    return rows
