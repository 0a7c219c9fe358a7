"""Which oneDNN implementation runs a convolution's direction: raced, as the cuDNN backend races its
engines, and chosen reproducibly among correct ones.

DeepBench's Intel benchmark asked for `convolution_direct` and took the implementation oneDNN
(then MKL-DNN) picks first. Here the candidates are every implementation that oneDNN's primitive
descriptor iterator (dnnl_primitive_desc_next_impl) offers for each algorithm,
`convolution_direct`, `convolution_winograd` (where oneDNN builds it for the CPU and the problem)
and `convolution_auto` (oneDNN's own choice between them), in that order, oneDNN's order within
each. Then:

1. a candidate whose implementation an earlier candidate already is (oneDNN names it the same:
   `convolution_auto` offers the direct implementations again) is not timed twice; oneDNN's
   reference implementations (`ref:*`, plain loops kept for correctness: 300x slower than
   `jit:avx512_core` on a 3x3 layer here, over a second a call) are listed, never timed, whenever
   an optimized one is offered;
2. each other candidate is timed briefly with the host clock (QUICK_S of back-to-back calls after a
   warm-up call, the median of them); one whose warm-up call already took OUT_OF_CONTEST times the
   fastest median so far keeps that figure; candidates left when the direction's RACE_BUDGET_S is
   spent are listed as not raced;
3. candidates are checked in order of speed until one passes its check (a wrong implementation is
   never chosen, and the record lists it with its error); of those within MARGIN of that fastest
   correct one, the one oneDNN offers first is chosen, so that timing noise cannot flip the choice
   between two implementations of about the same speed.

The choice, the candidates and their times are recorded with the direction; `--onednn-impl` (and
`deepbench verify`, from the record) runs a named implementation instead."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...results import Check

QUICK_S = 0.05  # a candidate's timing: back-to-back calls for this long after its warm-up call ...
QUICK_MIN_CALLS = 3  # ... and at least this many
RACE_BUDGET_S = 10.0  # seconds one direction's race may spend timing candidates (checks of the chosen always run)
OUT_OF_CONTEST = 3.0  # a warm-up call this many times the fastest median so far: the candidate is not timed on
MARGIN = 0.03  # within this of the fastest correct candidate counts as as fast (CPU figures move by ~2% run to run)
REFERENCE_PREFIX = "ref"  # oneDNN's reference implementations: 'ref:any', 'ref_int8:any', ...


@dataclass
class Candidate:
    """One implementation of one algorithm, in oneDNN's offer order (`rank`)."""

    algorithm: str  # convolution_direct, convolution_winograd, convolution_auto
    impl: str  # oneDNN's implementation name (impl_info_str), e.g. 'brgconv:avx512_core_amx'
    rank: int
    build: Any = None  # what the caller needs to run it (its primitive descriptor)

    @property
    def pin(self) -> str:
        """How results record it and --onednn-impl names it: 'ALGORITHM:IMPLEMENTATION'."""
        return f"{self.algorithm}:{self.impl}"


@dataclass
class Choice:
    chosen: Candidate
    table: list[dict[str, Any]] = field(default_factory=list)
    fastest_correct_us: float = math.nan

    def record(self) -> dict[str, Any]:
        return {
            "chosen_by": f"fastest correct candidate, or one within {MARGIN:.0%} of it that oneDNN offers earlier "
            "(kernels/backends/onednn/race.py)",
            "fastest_correct_us": self.fastest_correct_us,
            "candidates": self.table,
        }


class NoCorrectCandidate(RuntimeError):
    """Every candidate failed to run or failed its check."""


def quick_us(
    run: Callable[[], object], out_of_contest_us: float = math.inf, clock: Callable[[], float] = time.perf_counter
) -> float:
    """A candidate's brief time in microseconds: a warm-up call (JIT, first touch), then the median of
    QUICK_S of back-to-back calls; the warm-up call's own time where it is already out of contest."""
    start = clock()
    run()
    first_us = (clock() - start) * 1e6
    if first_us > out_of_contest_us:
        return first_us
    times: list[float] = []
    began = clock()
    while len(times) < QUICK_MIN_CALLS or clock() - began < QUICK_S:
        t0 = clock()
        run()
        times.append((clock() - t0) * 1e6)
    return statistics.median(times)


def screened(candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[dict[str, Any]]]:
    """(the candidates to time, the rows of those set aside: duplicates and reference implementations)."""
    optimized = any(not c.impl.startswith(REFERENCE_PREFIX) for c in candidates)
    seen: dict[str, Candidate] = {}
    timed, rows = [], []
    for c in candidates:
        row = {"candidate": c.pin, "rank": c.rank}
        if c.impl in seen:
            rows.append({**row, "status": "duplicate", "reason": f"the same implementation as {seen[c.impl].pin}"})
        elif optimized and c.impl.startswith(REFERENCE_PREFIX):
            rows.append({**row, "status": "skipped", "reason": "oneDNN's reference implementation (plain loops)"})
        else:
            timed.append(c)
        seen.setdefault(c.impl, c)
    return timed, rows


def choose(
    candidates: Sequence[Candidate],
    time_us: Callable[[Candidate, float], float],
    check: Callable[[Candidate], Check],
    budget_s: float = RACE_BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
) -> Choice:
    """The rule above: `time_us(c, out_of_contest_us)` times a candidate (raising where it cannot run),
    `check(c)` runs it once and checks its output."""
    timed, rows = screened(candidates)
    table = {c.rank: {"candidate": c.pin, "rank": c.rank, "status": "unchecked"} for c in timed}
    figures: list[tuple[float, Candidate]] = []
    start, fastest = clock(), math.inf
    for c in timed:
        if figures and clock() - start >= budget_s:
            table[c.rank].update(status="not raced", reason=f"the race's {budget_s:g} s were spent")
            continue
        try:
            t = time_us(c, fastest * OUT_OF_CONTEST)
        except Exception as exc:  # noqa: BLE001 - an implementation that cannot run is not a candidate
            table[c.rank].update(status="rejected", reason=f"did not run: {type(exc).__name__}: {exc}"[:300])
            continue
        table[c.rank]["quick_us"] = t
        fastest = min(fastest, t)
        figures.append((t, c))
    figures.sort(key=lambda tc: tc[0])

    def passes(c: Candidate) -> bool:
        result = check(c)
        table[c.rank].update(
            status="passed" if result.passed else "rejected", error=result.error, tolerance=result.tolerance
        )
        if not result.passed:
            table[c.rank]["reason"] = (
                f"check failed ({result.method}: error {result.error} > tolerance {result.tolerance})"
            )
        return result.passed

    best = next(((t, c) for t, c in figures if passes(c)), None)
    if best is None:
        reasons = "; ".join(f"{row['candidate']}: {row.get('reason', row['status'])}" for row in table.values())
        raise NoCorrectCandidate(f"no oneDNN implementation computed this direction correctly: {reasons}"[:1000])
    limit = best[0] * (1 + MARGIN)
    eligible = [
        c
        for t, c in figures
        if t <= limit
        and (table[c.rank]["status"] == "passed" or (table[c.rank]["status"] == "unchecked" and passes(c)))
    ]
    chosen = min(eligible, key=lambda c: c.rank)
    table[chosen.rank]["status"] = "chosen"
    ordered = sorted([*table.values(), *rows], key=lambda row: row["rank"])
    return Choice(chosen, ordered, best[0])
