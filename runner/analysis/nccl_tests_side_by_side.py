"""The harness's collectives beside nccl-tests' figures for the same collective, ranks, size and method.

Like with like: a harness kernel is set beside an nccl-tests row only when the collective, the number
of ranks, nccl-tests' size in bytes (the kernel's `bytes` on those ranks) and the way calls were
launched (CUDA graph replays, nccl-tests -G, or eager calls) are the same; anything else is left
unmatched and counted. Both sides' busbw follow nccl-tests' definition (kernels/collective_kernels.py).

Both sides' times are averaged over ranks, as nccl-tests reports by default (-a 1: each rank's mean
over its -n iterations, averaged over ranks): the harness's is the mean over ranks of each rank's
mean time per call (info.time_mean_over_ranks_us). The harness's own headline, the median over
samples of the slowest rank's time, is shown beside it: for a rooted collective (reduce, broadcast)
on 4 ranks the slowest rank reads up to 25% above the average (2026-11-28, 4 H200s), so comparing
it with nccl-tests' average would compare two definitions. A run that recorded no per-rank times
is compared by its headline, and the pair says so.

The issue's targets (SUMMARY): for sizes of at least 4 MiB the harness's busbw within 5% of
nccl-tests', and at DeepBench's 100,000 floats (400,000 bytes) the harness's time at most 1.5x
nccl-tests'."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

from deepbench.kernels.backends import declared
from deepbench.kernels.backends.collectives.declaration import CollectiveInfo, CollectivePartInfo
from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.results import KernelResult, Status

from .nccl_tests import Figures, Output

DIRECTIONS = ("in_place", "out_of_place")
BUSBW_MIN_BYTES = 4 * 2**20  # "4 MB and larger": nccl-tests' power-of-two sizes from 4 MiB
BUSBW_WITHIN = 0.05
LATENCY_BYTES = 100_000 * 4  # DeepBench's smallest all-reduce, 100,000 floats
LATENCY_RATIO = 1.5
GRAPH = "graph"
ANCHOR = "nccl-tests"
# The libraries nccl-tests measures: the backends that declare it their anchor (a result's collective
# library starts with the backend's name: through torch.distributed or nccl4py).
ANCHORED = tuple(name for name, d in declared().items() if ANCHOR in d.anchors)


class Pair(BaseModel):
    """One collective, size and direction on both sides."""

    model_config = ConfigDict(frozen=True)
    op: str
    bytes: int
    ranks: int
    direction: str
    method: str  # "graph" or "eager" (both sides)
    library: str
    harness_us: float  # averaged over ranks where the run recorded per-rank times (the module says why)
    harness_busbw: float
    harness_slowest_us: float  # the harness's headline: median over samples of the slowest rank
    averaged: bool  # whether harness_us is the rank average (False: the headline, all that was recorded)
    comm_config: str = ""  # the harness's communicator configuration (HarnessFigure.comm_config)
    nccl_tests_us: float
    nccl_tests_busbw: float

    @property
    def same_library(self) -> bool:
        """Whether the harness's side ran on a library nccl-tests measures (a backend that declares it
        its anchor): another library's figure is shown beside nccl-tests', flagged, and no target counts it."""
        return self.library.startswith(ANCHORED)

    @property
    def busbw_ratio(self) -> float:
        return self.harness_busbw / self.nccl_tests_busbw if self.nccl_tests_busbw else 0.0

    @property
    def time_ratio(self) -> float:
        return self.harness_us / self.nccl_tests_us if self.nccl_tests_us else 0.0

    @property
    def busbw_target(self) -> bool | None:
        """Within 5% of nccl-tests' busbw, for sizes the target covers (None elsewhere)."""
        if not self.same_library or self.bytes < BUSBW_MIN_BYTES:
            return None
        return abs(self.busbw_ratio - 1.0) <= BUSBW_WITHIN

    @property
    def latency_target(self) -> bool | None:
        if not self.same_library or self.bytes != LATENCY_BYTES:
            return None
        return self.time_ratio <= LATENCY_RATIO


class HarnessFigure(BaseModel):
    model_config = ConfigDict(frozen=True)
    op: str
    bytes: int
    ranks: int
    direction: str
    method: str
    library: str
    time_us: float
    busbw: float
    slowest_us: float
    averaged: bool
    comm_config: str = ""  # the communicator's configuration (info.comm_config; '' before it was recorded)


def harness_figures(results: Iterable[KernelResult]) -> list[HarnessFigure]:
    """Every measured direction of every collective kernel that ran on several ranks."""
    out = []
    for r in results:
        collective = info_of(CollectiveInfo, r.info)
        if r.status is not Status.OK or not r.parts or collective is None or (collective.ranks or 1) < 2:
            continue
        method = GRAPH if collective.timing == GRAPH else "eager"
        measured: dict[str, tuple[float | None, dict[str, Any]]] = {
            p.direction: (p.measurement.stats.median, p.info) for p in r.parts
        }
        twin = collective.twin
        if twin is not None:
            measured[twin.direction] = (twin.median, twin.info)
        for direction, (median, raw) in measured.items():
            info = info_of(CollectivePartInfo, raw)
            if direction in DIRECTIONS and info is not None and info.busbw_gbps is not None:
                assert info.bytes is not None and info.ranks is not None and median is not None
                average = info.time_mean_over_ranks_us
                time_us = average or median
                busbw = info.busbw_gbps if info.bus_factor is None else info.bytes / time_us / 1e3 * info.bus_factor
                out.append(
                    HarnessFigure(
                        op=r.op,
                        bytes=info.bytes,
                        ranks=info.ranks,
                        direction=direction,
                        method=method,
                        library=collective.library_name(r.backend),
                        time_us=time_us,
                        busbw=busbw,  # nccl-tests': S / t x factor, of the time compared
                        slowest_us=median,
                        averaged=bool(average),
                        comm_config=collective.comm_config,
                    )
                )
    return out


def pair_up(figures: Iterable[HarnessFigure], outputs: Iterable[Output]) -> tuple[list[Pair], list[HarnessFigure]]:
    """(the pairs, the harness figures nccl-tests has nothing like). An nccl-tests direction it did
    not check (N/A: in-place all-to-all and send/recv) is no figure to compare with."""
    table: dict[tuple[str, int, int, str, str], Figures] = {}
    for o in outputs:
        method = GRAPH if o.graph else "eager"
        for row in o.rows:
            for direction in DIRECTIONS:
                fig: Figures = getattr(row, direction)
                if fig.wrong is not None:
                    table[(o.op, o.ranks, row.bytes, direction, method)] = fig
    pairs, alone = [], []
    for f in figures:
        theirs = table.get((f.op, f.ranks, f.bytes, f.direction, f.method))
        if theirs is None:
            alone.append(f)
            continue
        pairs.append(
            Pair(
                op=f.op,
                bytes=f.bytes,
                ranks=f.ranks,
                direction=f.direction,
                method=f.method,
                library=f.library,
                harness_us=f.time_us,
                harness_busbw=f.busbw,
                harness_slowest_us=f.slowest_us,
                averaged=f.averaged,
                comm_config=f.comm_config,
                nccl_tests_us=theirs.time_us,
                nccl_tests_busbw=theirs.busbw_gbps,
            )
        )
    pairs.sort(key=lambda p: (p.op, p.method, p.direction, p.bytes))
    return pairs, alone


def summary(pairs: list[Pair], unmatched: int) -> str:
    """One line against the issue's targets."""
    busbw = [p for p in pairs if p.busbw_target is not None]
    latency = [p for p in pairs if p.latency_target is not None]
    busbw_ok = sum(1 for p in busbw if p.busbw_target)
    latency_ok = sum(1 for p in latency if p.latency_target)
    worst, best = (f(busbw, key=lambda p: p.busbw_ratio, default=None) for f in (min, max))
    worst_text = (
        f" (lowest {worst.busbw_ratio:.3f}: {worst.op} {worst.direction} {worst.method} {worst.bytes} B; "
        f"highest {best.busbw_ratio:.3f}: {best.op} {best.direction} {best.method} {best.bytes} B)"
        if worst and best
        else ""
    )
    slowest = max(latency, key=lambda p: p.time_ratio, default=None)
    slow_text = (
        f" (highest {slowest.time_ratio:.2f}x: {slowest.op} {slowest.direction} {slowest.method})" if slowest else ""
    )
    return (
        f"SUMMARY: busbw within {BUSBW_WITHIN:.0%} of nccl-tests at >= {BUSBW_MIN_BYTES // 2**20} MiB: "
        f"{busbw_ok}/{len(busbw)}{worst_text}; time at {LATENCY_BYTES:,} B within {LATENCY_RATIO}x: "
        f"{latency_ok}/{len(latency)}{slow_text}; {len(pairs)} pairs"
        + (
            f" ({off} on another library: shown, not counted)"
            if (off := sum(1 for p in pairs if not p.same_library))
            else ""
        )
        + f", {unmatched} harness figures without an nccl-tests figure of the same collective, ranks, size "
        "and method; harness communicators: "
        + (", ".join(sorted({p.comm_config or "not recorded" for p in pairs})) or "-")
    )
