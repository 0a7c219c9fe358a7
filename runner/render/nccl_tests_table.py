"""The harness's collectives beside nccl-tests' figures, one table per collective
(runner/analysis/nccl_tests_side_by_side.py pairs them)."""

from __future__ import annotations

from collections.abc import Iterable

from deepbench.kernels.catalog import traits_of

from ..analysis.nccl_tests_side_by_side import Pair
from .tables import Table

SIDE_BY_SIDE_HEADERS = [
    "size (B)",
    "ranks",
    "method",
    "direction",
    "library",
    "harness (us)",
    "harness slowest rank (us)",
    "nccl-tests (us)",
    "time ratio",
    "harness busbw",
    "nccl-tests busbw",
    "busbw ratio",
    "target",
]


def side_by_side_table(op: str, pairs: Iterable[Pair]) -> Table:
    """One collective's pairs (nccl_tests_side_by_side.Pair) as a table: both times averaged over ranks (the
    harness's slowest rank beside), both busbw, their ratios, and whether the pair meets its target
    ('' where no target covers its size)."""
    rows = []
    for p in pairs:
        if p.op != op:
            continue
        target = p.busbw_target if p.busbw_target is not None else p.latency_target
        rows.append(
            [
                f"{p.bytes:,}",
                str(p.ranks),
                p.method,
                p.direction.replace("_", " "),
                p.library,
                f"{p.harness_us:,.2f}" + ("" if p.averaged else " (slowest)"),
                f"{p.harness_slowest_us:,.2f}",
                f"{p.nccl_tests_us:,.2f}",
                f"{p.time_ratio:.3f}",
                f"{p.harness_busbw:.2f}",
                f"{p.nccl_tests_busbw:.2f}",
                f"{p.busbw_ratio:.3f}",
                "other library" if not p.same_library else "" if target is None else "yes" if target else "NO",
            ]
        )
    return Table(op, f"{traits_of(op).title} beside nccl-tests", SIDE_BY_SIDE_HEADERS, rows, ("library", "method"))


def side_by_side_tables(pairs: list[Pair]) -> list[Table]:
    """One table per collective that has pairs, in the order the pairs come."""
    ops = list(dict.fromkeys(p.op for p in pairs))
    return [side_by_side_table(op, pairs) for op in ops]
