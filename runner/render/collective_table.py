"""The all-reduce table, as DeepBench showed it (size, ranks, time) with nccl-tests' bandwidths.

Columns: set, floats (DeepBench's size), ranks, the library that reduced, then per direction
(in place, out of place) the median time per call over samples (each sample the slowest rank's:
the figure every other view shows) and the slowest rank's mean, named as a mean, the algorithm
bandwidth S/t and the bus bandwidth S/t * 2(n-1)/n (GB/s, from the median; see
kernels/backends/distributed/common.py); on one rank no bandwidth (nothing crosses a link)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from deepbench.kernels.catalog import traits_of
from deepbench.kernels.results import KernelResult, Status

HEADERS = ["set", "floats", "ranks", "library",
           "in-place median (us)", "in-place slowest rank mean (us)", "in-place algbw GB/s", "in-place busbw GB/s",
           "out-of-place median (us)", "out-of-place slowest rank mean (us)", "out-of-place algbw GB/s",
           "out-of-place busbw GB/s", "status"]
# What a narrow terminal leaves out first (runner/render/tables.py Table.droppable).
DROP_ORDER = ("set", "library", "out-of-place algbw GB/s", "in-place algbw GB/s",
              "out-of-place slowest rank mean (us)", "in-place slowest rank mean (us)", "out-of-place busbw GB/s")


def _figures(median: float | None, info: dict[str, Any] | None, fmt_us, fmt_num, ranks: Any) -> list[str]:
    """The median time, the slowest rank's mean, then the bandwidths: none on one rank, where
    nothing crosses a link (runner/analysis/sanity.py)."""
    if not info:
        return ["", "", "", ""]
    times = [fmt_us(median), fmt_us(info.get("time_max_over_ranks_us"))]
    if ranks == 1:
        return [*times, "", ""]
    return [*times, fmt_num(info.get("algbw_gbps")), fmt_num(info.get("busbw_gbps"))]


def all_reduce_rows(results: Iterable[KernelResult], set_short: dict[str, str], status, fmt_us, fmt_num
                    ) -> list[list[str]]:
    rows = []
    for r in results:
        if not traits_of(r.op).collective:
            continue
        ok = r.status is Status.OK
        in_place = r.parts[0].info if ok and r.parts else None
        in_median = r.parts[0].measurement.stats.median if ok and r.parts else None
        twin = r.info.get("out_of_place", {}) if ok else {}
        out, out_median = twin.get("info"), twin.get("measurement", {}).get("stats", {}).get("median")
        library = r.info.get("library")
        library = library.get("collective_library", r.backend) if isinstance(library, dict) else (library or r.backend)
        ranks = r.info.get("ranks", "")
        rows.append([set_short.get(r.set, r.set), str(r.kernel.floats), str(ranks), str(library),
                     *_figures(in_median, in_place, fmt_us, fmt_num, ranks),
                     *_figures(out_median, out, fmt_us, fmt_num, ranks), status(r)])
    return rows
