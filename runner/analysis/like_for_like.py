"""What a time comparison leaves out, said beside it: the inputs each side drew, and the clocks.

- Inputs: zeros draw less power than random values, so a GPU holds a higher clock (an H100's large
  fp16 GEMMs ~14% faster on DeepBench's zeros). Two runs that drew different inputs (--inputs,
  recorded per result) are not compared like with like: `input_warnings` names them.
- Accumulate types: `--any-precision` pairs a kernel across precisions; where the two sides
  accumulated in different types (fp16 sums in float32, fp16acc16, DeepBench's own half call, in
  float16: it draws less power and holds a higher clock), `accumulate_warnings` names them.
- Clocks: two cards of one model disagree through their clocks (the power limiter holds each
  where its own silicon allows). Where both sides recorded their SM clocks, `cycle_ratios` judges
  time x clock (cycles) as well, as nvbench's compare does, when the clocks differ by more than
  CLOCK_THRESHOLD; a memory-bound kernel is judged with the memory clock instead, since its time
  follows the memory's. A side whose clock fell while it was sampled is named with NVML's reason.

Both read what entry_of_result puts in an entry's `extra` (result_extras.py), so the comparison
itself (compare.py) stays a comparison of times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deepbench.kernels.inputs import drawn_for
from deepbench.kernels.precision import PRECISIONS, Precision

from .compare import Comparison, Ratio, geomean, speed, verdict
from .result_extras import MEMORY_BOUND
from .sources import Entry

CLOCK_THRESHOLD = 0.02  # clocks closer than 2% leave the time verdict as it is (the timer's noise is ~1%)


def drawn(e: Entry) -> str:
    """What an entry's operands were drawn from: results before --inputs drew normal values; a
    published DeepBench figure (a reference's row, named by its sheet) drew DeepBench's own (zeros
    for half and int8, uniform for float)."""
    if "sheet" in e.extra:
        try:
            return drawn_for("deepbench", Precision(e.precision))
        except ValueError:  # a precision this tool does not run: nothing to say
            return "deepbench"
    return e.extra.get("inputs", "normal")


def input_warnings(cmp: Comparison) -> list[str]:
    """One line per other source whose kernels drew other inputs than the baseline's."""
    out = []
    for i, other in enumerate(cmp.others):
        pairs: dict[tuple[str, str], int] = {}
        for row in cmp.rows:
            o = row.others[i]
            if row.base is None or o is None or row.ratios[i] is None:
                continue
            key = (drawn(row.base), drawn(o))
            if key[0] != key[1]:
                pairs[key] = pairs.get(key, 0) + 1
        for (base_drew, other_drew), n in sorted(pairs.items()):
            why = (
                "zeros draw less power and may hold a higher clock"
                if "zeros" in (base_drew, other_drew)
                else "the data moves a GPU's power draw and so its clock"
            )
            out.append(
                f"{other.label} drew {other_drew} inputs where {cmp.base.label} drew {base_drew} ({n} kernels): "
                f"{why}, so these times are not like with like"
            )
    return out


def accumulate_of(e: Entry) -> str | None:
    """The type an entry's precision accumulates in (precision.py PRECISIONS); None for a precision
    this tool does not know."""
    try:
        return PRECISIONS[Precision(e.precision)].accumulate
    except ValueError:
        return None


def accumulate_warnings(cmp: Comparison) -> list[str]:
    """One line per other source whose kernels were paired (--any-precision) with baseline kernels
    that accumulated in another type."""
    out = []
    for i, other in enumerate(cmp.others):
        pairs: dict[tuple[str, str, str, str], int] = {}
        for row in cmp.rows:
            o = row.others[i]
            if row.base is None or o is None or row.ratios[i] is None:
                continue
            base_acc, other_acc = accumulate_of(row.base), accumulate_of(o)
            if base_acc and other_acc and base_acc != other_acc:
                key = (row.base.precision, base_acc, o.precision, other_acc)
                pairs[key] = pairs.get(key, 0) + 1
        for (base_p, base_acc, other_p, other_acc), n in sorted(pairs.items()):
            out.append(
                f"{other.label}'s {other_p} accumulates in {other_acc} where {cmp.base.label}'s {base_p} "
                f"accumulates in {base_acc} ({n} kernels): another arithmetic, so these times are not like with like"
            )
    return out


@dataclass(frozen=True)
class CycleRatio:
    """other / baseline in cycles (time x clock) of one kernel, where the clocks differed."""

    time: Ratio
    clock: str  # "sm" or "memory"
    base_mhz: float
    other_mhz: float
    ratio: float
    verdict: str


def _clocks(base: Entry, other: Entry) -> tuple[str, float, float] | None:
    key, name = ("mem_mhz", "memory") if base.extra.get("bound") == MEMORY_BOUND else ("sm_mhz", "sm")
    b, o = base.extra.get(key), other.extra.get(key)
    return (name, b, o) if b and o else None


def cycle_ratio(base: Entry, other: Entry, time: Ratio, threshold: float) -> CycleRatio | None:
    """The kernel judged in cycles, where both sides recorded the clock that bounds it and those
    clocks differ by more than CLOCK_THRESHOLD; None otherwise (the time verdict stands)."""
    clocks = _clocks(base, other)
    if clocks is None:
        return None
    name, b, o = clocks
    scale = o / b
    if abs(scale - 1) <= CLOCK_THRESHOLD:
        return None
    ratio = time.ratio * scale
    judged = "unclear" if math.isnan(time.low) else verdict(ratio, time.low * scale, time.high * scale, threshold)
    return CycleRatio(time, name, b, o, ratio, judged)


def cycle_ratios(cmp: Comparison, i: int) -> list[tuple[Entry, CycleRatio]]:
    """Other source `i`'s kernels judged in cycles (see cycle_ratio)."""
    out = []
    for row in cmp.rows:
        o, t = row.others[i], row.ratios[i]
        if row.base is not None and o is not None and t is not None:
            c = cycle_ratio(row.base, o, t, cmp.threshold)
            if c is not None:
                out.append((row.base, c))
    return out


def clock_fell_lines(cmp: Comparison) -> list[str]:
    """Kernels whose clock fell while sampled, with NVML's reason, per source."""
    out = []
    for source in cmp.sources:
        fell = [e for e in source.entries if "clock_fell" in e.extra]
        if fell:
            first = fell[0].extra["clock_fell"]
            reasons = sorted({r for e in fell for r in e.extra["clock_fell"].get("reasons", ())}) or ["none given"]
            out.append(
                f"{source.label}: the clock fell while {len(fell)} kernel(s) were sampled (e.g. "
                f"{fell[0].kernel.id} {first['from_mhz']:.0f} -> {first['to_mhz']:.0f} MHz); "
                f"NVML's reasons: {', '.join(reasons)}"
            )
    return out


def cycle_lines(cmp: Comparison, rows_shown: int = 10) -> list[str]:
    """For each other source: how many kernels were judged in cycles, their verdicts beside the
    time verdicts, and the kernels whose verdict the clocks changed."""
    out = []
    for i, other in enumerate(cmp.others):
        judged = cycle_ratios(cmp, i)
        if not judged:
            continue
        counts = {v: sum(c.verdict == v for _, c in judged) for v in ("same", "faster", "slower", "unclear")}
        before = {v: sum(c.time.verdict == v for _, c in judged) for v in counts}
        out.append(
            f"{other.label} vs {cmp.base.label}: {len(judged)} kernels ran at clocks more than "
            f"{CLOCK_THRESHOLD:.0%} apart, judged in cycles (time x clock; memory-bound ones by the memory "
            f"clock): "
            + ", ".join(f"{v} {counts[v]}" for v in counts)
            + " (in time: "
            + ", ".join(f"{v} {before[v]}" for v in before)
            + ")"
        )
        changed = [(e, c) for e, c in judged if c.verdict != c.time.verdict]
        for e, c in changed[:rows_shown]:
            out.append(
                f"  {e.kernel.id}/{e.precision}: time {speed(c.time.ratio) or 'as fast'} ({c.time.verdict}), "
                f"{c.clock} clock {c.other_mhz:.0f} vs {c.base_mhz:.0f} MHz, cycles "
                f"{speed(c.ratio) or 'as many'} ({c.verdict})"
            )
        if len(changed) > rows_shown:
            out.append(f"  ... and {len(changed) - rows_shown} more whose verdict the clocks changed")
    return out


def energy_ratio(base: Entry | None, other: Entry | None) -> float | None:
    """The other side's energy per call over the baseline's (--energy), where both sides measured it."""
    if base is None or other is None:
        return None
    b, o = base.extra.get("joules_per_call"), other.extra.get("joules_per_call")
    return o / b if b and o else None


def energy_lines(cmp: Comparison) -> list[str]:
    """Per other source, beside the time ratios: the geometric mean of the energy-per-call ratios of
    the kernels both sides measured energy for (--energy), and of their time ratios."""
    out = []
    for i, other in enumerate(cmp.others):
        pairs = [
            (e, t.ratio)
            for row in cmp.rows
            if (t := row.ratios[i]) is not None and (e := energy_ratio(row.base, row.others[i])) is not None
        ]
        if pairs:
            energy, time = geomean([e for e, _ in pairs]), geomean([t for _, t in pairs])
            out.append(
                f"{other.label} vs {cmp.base.label}: energy per call {energy:.3f}x the baseline's "
                f"(geomean of {len(pairs)} kernels with energy on both sides; time {time:.3f}x)"
            )
    return out


def notes(cmp: Comparison) -> list[str]:
    """Everything this module says about a comparison, warnings first."""
    warnings = accumulate_warnings(cmp) + input_warnings(cmp) + clock_fell_lines(cmp)
    return [f"warning: {w}" for w in warnings] + cycle_lines(cmp) + energy_lines(cmp)
