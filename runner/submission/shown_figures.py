"""The figures a report shows from a result's `info`, validated as its parts are: nothing a reader sees
is taken on trust where the bundle holds what it follows from.

- a collective's out-of-place twin (info.out_of_place, measured beside the in-place part: reports show its
  median, rank times and bandwidths): read as a part in strict mode (its statistics re-derived from its
  samples), then held to every rule a part is (result_checks.check_part) and to its own costs;
- a collective part's figures (CollectivePartInfo: ranks, bytes, bus factor, the ranks' times, algbw,
  busbw) re-derived from the kernel, the run's ranks and the part's samples (collectives/declaration.py
  `collective_figures`, what the harness records); with several ranks only rank 0's samples are in the
  bundle, so the ranks' times are bounded by them rather than re-derived;
- what the harness derives from the median (the alignment penalty, a sparse GEMM's speed-up over its dense
  twin, a model's inputs per second: harness/execute.py `derived_figures`), re-derived;
- the dense twin of a sparse GEMM and the unpadded twin of --pad both keep statistics, not samples: those
  are held to order (min <= p25 <= median <= p75 <= max, the mean within), the dense rate to the dense
  GEMM's FLOPs and its check to a passed one; their times themselves only verify can judge;
- the work per joule of --energy (Energy.rated), re-derived from the part's FLOPs and fewest bytes."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError

from ...kernels.backends.collectives.declaration import CollectiveInfo, CollectivePartInfo, collective_figures
from ...kernels.backends.contract.declaration import info_of
from ...kernels.backends.contract.dense_info import DenseTwinInfo
from ...kernels.backends.contract.model_info import ModelRunInfo
from ...kernels.catalog import GemmKernel, traits_of
from ...kernels.harness.execute import derived_figures
from ...kernels.harness.padding_info import PaddingInfo
from ...kernels.precision import tolerance
from ...kernels.results import KernelResult, PartResult, Plan, TimeStats
from .check_report import Add
from .loading import describe
from .result_checks import DERIVED_RTOL, TOLERANCE_SLACK, check_part
from .semantics import check_part_costs

OUT_OF_PLACE = "out_of_place"
RANK_TIME_DIGITS = 3  # collectives/declaration.py: time_per_rank_us is rounded to this many decimals


def close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=DERIVED_RTOL, abs_tol=1e-12)


def check_shown(r: KernelResult, plan: Plan | None, add: Add, warn: Add) -> None:
    """Every figure of an ok result's info that a report shows."""
    if traits_of(r.op).collective:
        check_collective(r, plan, add, warn)
    check_derived(r, add)
    check_dense_twin(r, add)
    check_unpadded(r, add)
    for p in r.parts:
        check_energy(r.id, p, add)


# ----- collectives ---------------------------------------------------------------------------------
def check_collective(r: KernelResult, plan: Plan | None, add: Add, warn: Add) -> None:
    info = info_of(CollectiveInfo, r.info)
    if info is None:
        add(r.id, "its info is not a collective's (ranks, library, bytes, timing, out_of_place)")
        return
    ranks = plan.settings.ranks if plan is not None else info.ranks
    if ranks is None or info.ranks != ranks:
        add(r.id, f"info.ranks {info.ranks} is not the run's {ranks} ranks")
        return
    nbytes = r.kernel.layout(ranks).bytes
    if info.bytes != nbytes:
        add(r.id, f"info.bytes {info.bytes} is not the {nbytes} bytes kernel {r.kernel.id} moves on {ranks} rank(s)")
    for p in r.parts:
        check_collective_part(r, p, ranks, add)
    if info.out_of_place is not None:
        check_out_of_place(r, info.out_of_place.model_dump(), ranks, plan, add, warn)


def check_out_of_place(r: KernelResult, twin: Any, ranks: int, plan: Plan | None, add: Add, warn: Add) -> None:
    """info.out_of_place: a part in all but name, held to every rule a part is."""
    where = f"info.{OUT_OF_PLACE}"
    if any(p.direction == OUT_OF_PLACE for p in r.parts):
        add(r.id, f"{where} beside a part of that direction: the out-of-place call is measured once")
        return
    try:
        part = PartResult.model_validate_json(json.dumps(twin), strict=True)
    except (ValidationError, ValueError, TypeError) as exc:
        text = describe(exc) if isinstance(exc, ValidationError) else str(exc)
        add(r.id, f"{where} is not a measured part: {text}"[:500])
        return
    if part.direction != OUT_OF_PLACE:
        add(r.id, f"{where}'s direction is {part.direction!r}")
    check_part_costs(r, part, plan.settings.device if plan is not None else "cpu", add, where=f"{where}: ")
    check_part(r, part.model_copy(update={"direction": where}), plan, add, warn)
    check_collective_part(r, part, ranks, add, where=f"{where}: ")


def check_collective_part(r: KernelResult, p: PartResult, ranks: int, add: Add, where: str = "") -> None:
    """A collective part's figures against those its kernel, the ranks and its samples give."""
    where = where or f"{p.direction}: "
    info = info_of(CollectivePartInfo, p.info)
    if info is None:
        add(r.id, f"{where}its info is not a collective part's")
        return
    factor = r.kernel.bus_factor(ranks)
    nbytes = r.kernel.layout(ranks).bytes
    repeat = getattr(r.kernel, "repeat", 0)
    want = collective_figures(p.measurement, [list(p.measurement.samples_us)], nbytes, factor, repeat)
    expected: dict[str, Any] = {"ranks": ranks, "bytes": nbytes, "bus_factor": factor}
    keys = ["algbw_gbps", "busbw_gbps", "timed_calls", "repeat_cap"]
    if ranks == 1:
        keys += ["time_per_rank_us", "time_mean_over_ranks_us", "time_max_over_ranks_us"]
    expected.update({k: want[k] for k in keys})
    for key, value in expected.items():
        recorded = getattr(info, key)
        if recorded is not None and not _same(recorded, value):  # a key older records lack is not shown either
            add(r.id, f"{where}info.{key} {recorded!r} is not the {value!r} its kernel, ranks and samples give")
    if ranks > 1:
        _check_rank_times(r.id, where, p, info, ranks, add)


def _same(recorded: Any, value: Any) -> bool:
    """The recorded figure is the derived one: numbers equal to the last bits JSON keeps (an integer
    written as a float, as older records did, is the same number), lists element by element."""
    if isinstance(value, list):
        return isinstance(recorded, list) and len(recorded) == len(value) and all(map(_same, recorded, value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = isinstance(recorded, (int, float)) and not isinstance(recorded, bool)
        return number and close(float(recorded), float(value))
    return bool(recorded == value)


def _check_rank_times(rid: str, where: str, p: PartResult, info: CollectivePartInfo, ranks: int, add: Add) -> None:
    """With several ranks, each sample is the slowest rank's time: no rank's mean exceeds the samples'
    mean, and together the ranks' means reach it."""
    per_rank, mean_over, max_over = info.time_per_rank_us, info.time_mean_over_ranks_us, info.time_max_over_ranks_us
    if per_rank is None or len(per_rank) != ranks or mean_over is None or max_over is None:
        add(rid, f"{where}info's rank times are not {ranks} numbers with their mean and maximum")
        return
    slowest = sum(p.measurement.kept_us) / len(p.measurement.kept_us)
    rounding = 10.0**-RANK_TIME_DIGITS
    if not (
        max_over <= slowest * (1 + DERIVED_RTOL)
        and sum(per_rank) + ranks * rounding >= slowest * (1 - DERIVED_RTOL)
        and abs(max(per_rank) - max_over) <= rounding
        and abs(sum(per_rank) / ranks - mean_over) <= rounding
    ):
        add(
            rid,
            f"{where}info's rank times ({per_rank[:8]}, mean {mean_over:g}, max {max_over:g}) do not fit its "
            f"samples, each the slowest rank's time (mean {slowest:g} us)",
        )


# ----- what the median makes of the info ---------------------------------------------------------
def check_derived(r: KernelResult, add: Add) -> None:
    """The alignment penalty, the speed-up over the dense twin and the inputs per second, as the
    harness derives them from the result's median (present exactly where they can be derived)."""
    if r.time_us is None:
        return
    want = derived_figures(r.info, r.time_us.median)
    padding, dense, model = info_of(PaddingInfo, r.info), info_of(DenseTwinInfo, r.info), info_of(ModelRunInfo, r.info)
    recorded = {
        "alignment_penalty": padding.alignment_penalty if padding else None,
        "speedup_vs_dense": dense.speedup_vs_dense if dense else None,
        "throughput_per_s": model.throughput_per_s if model else None,
    }
    for key, value in recorded.items():
        if (key in want or value is not None) and not _same(value, want.get(key)):
            add(r.id, f"info.{key} {value!r} does not follow from its median and info ({want.get(key)!r})")


def check_dense_twin(r: KernelResult, add: Add) -> None:
    """A sparse GEMM's dense twin: ordered statistics, the dense GEMM's rate, a passed check."""
    dense = info_of(DenseTwinInfo, r.info)
    if dense is None or dense.dense_time_us is None:
        return
    stats = dense.dense_time_us
    _check_order(r.id, "info.dense_time_us", stats, add)
    k = r.kernel
    gemm = GemmKernel(set=k.set, index=k.index, m=k.m, n=k.n, k=k.k, a_t=k.a_t, b_t=k.b_t)
    rate = dense.dense_tflops
    if stats.median > 0 and not _same(rate, gemm.flops() / stats.median / 1e6):
        add(r.id, f"info.dense_tflops {rate!r} does not follow from the dense GEMM's FLOPs and median")
    c = dense.dense_check
    bound = tolerance(r.precision.name, reduction=gemm.k) * TOLERANCE_SLACK
    if c is None or not c.passed or c.error is None or not (0 <= c.error <= c.tolerance <= bound):
        add(r.id, f"info.dense_check did not pass within a tolerance this tool allows ({bound:g})")


def check_unpadded(r: KernelResult, add: Add) -> None:
    """--pad both's unpadded twin: ordered statistics."""
    padding = info_of(PaddingInfo, r.info)
    if padding is not None and padding.unpadded is not None and padding.unpadded.time_us is not None:
        _check_order(r.id, "info.unpadded.time_us", padding.unpadded.time_us, add)


def _check_order(rid: str, where: str, s: TimeStats, add: Add) -> None:
    if not (0 < s.min <= s.p25 <= s.median <= s.p75 <= s.max and s.min <= s.mean <= s.max):
        add(rid, f"{where} is not ordered statistics of positive times (min <= p25 <= median <= p75 <= max)")


def check_energy(rid: str, p: PartResult, add: Add) -> None:
    """--energy: the work per joule re-derived from the part's FLOPs and fewest bytes."""
    e = p.measurement.energy
    if e is None:
        return
    want = e.rated(p.flops, p.min_bytes)
    for key in ("gflops_per_j", "gb_per_j"):
        recorded, value = getattr(e, key), getattr(want, key)
        if (recorded is None) != (value is None) or (value is not None and not close(recorded, value)):
            add(rid, f"{p.direction}: energy.{key} {recorded!r} does not follow from its work and joules ({value!r})")
