"""The answer a report starts with: per operation and precision, how many kernels ran and how,
their geometric-mean throughput and share of the measured peak, their flags, and the kernels
closest to and furthest from the roof.

Geometric means because kernels span five orders of magnitude in time: an arithmetic mean would
be the few largest kernels' figure. One-rank collectives have no bandwidth (runner/analysis/sanity.py), so
they count in the kernels but not in the mean."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from deepbench.kernels.catalog import operations, traits_of
from deepbench.kernels.op_traits import Rate

from ..render.tables import Table, fmt_sig
from .roofline import roof
from .sanity import ABOVE_PEAK, PEAK_PCT, Context, Flag, one_rank
from .sanity import flags as sanity_flags
from .sources import Entry, precision_order

STATUSES = ("ok", "unsupported", "failed", "timeout")


@dataclass(frozen=True)
class Group:
    op: str
    precision: str
    entries: tuple[Entry, ...]
    counts: Counter
    rate_unit: str  # "TFLOP/s", or "GB/s" for collectives
    geomean_rate: float | None
    geomean_pct: float | None
    flags: Counter
    # the kernels at or under their measured ceiling closest to it and furthest from it: one above it is not
    # close to the roof but past it, which its flag explains (above_peak)
    closest: tuple[Entry, float] | None
    furthest: tuple[Entry, float] | None
    # the kernels above their measured ceiling, by the reason their above-peak flag gives: (reason, count,
    # highest % of the peak)
    above_peak: tuple[tuple[str, int, float], ...] = ()


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def groups(entries: list[Entry], ctx: Context) -> list[Group]:
    out = []
    order = operations()
    keys = sorted(
        {(e.kernel.op, e.precision) for e in entries},
        key=lambda k: (order.index(k[0]) if k[0] in order else len(order), precision_order(k[1])),
    )
    for op, prec in keys:
        es = tuple(e for e in entries if e.kernel.op == op and e.precision == prec)
        ok = [e for e in es if e.ok]
        rate = traits_of(op).rated_in
        rates = [e.gbps if rate is Rate.GBPS else e.tflops for e in ok if not one_rank(e)]
        pcts = [(e, r.pct_of_peak) for e in ok for r in [roof(e, ctx.ceilings)] if r]
        credible = [(e, p) for e, p in pcts if p <= PEAK_PCT]
        checked = {id(e): sanity_flags(e, ctx) for e in ok}  # once per kernel: the marks and the causes read them
        marks = Counter(f for e in ok for f in e.flags)
        marks.update(f.name for fs in checked.values() for f in fs)
        out.append(
            Group(
                op,
                prec,
                es,
                Counter(e.status for e in es),
                rate.value,
                geomean([r for r in rates if r]),
                geomean([p for _, p in pcts]),
                marks,
                max(credible, key=lambda t: t[1]) if credible else None,
                min(credible, key=lambda t: t[1]) if credible else None,
                above_peak([(checked[id(e)], p) for e, p in pcts if p > PEAK_PCT]),
            )
        )
    return out


def above_peak(above: list[tuple[tuple[Flag, ...], float]]) -> tuple[tuple[str, int, float], ...]:
    """The kernels above their ceiling (each its flags and % of the peak) grouped by their above-peak flag's
    cause, the most first."""
    by_reason: dict[str, list[float]] = {}
    for flags, pct in above:
        for f in flags:
            if f.name == ABOVE_PEAK:
                by_reason.setdefault(f.short, []).append(pct)
    return tuple(sorted(((r, len(p), max(p)) for r, p in by_reason.items()), key=lambda t: -t[1]))


def above_peak_text(g: Group) -> str:
    """Why a group's figures pass 100% of the peak, beside them: "3 up to 1128%: memory-bound, its data fit
    the 315 MB last-level cache (the bandwidth ceiling copies from memory)"."""
    return "; ".join(f"{n} up to {_pct(top)}: {reason}" for reason, n, top in g.above_peak)


def flags_text(counts: Counter) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.most_common())


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


ABOVE_HEADER = "above 100% of peak"


def summary_table(gs: list[Group], explain: bool = False) -> Table:
    """Counts of a status left blank where none (a column of blanks is left out of a narrow terminal).
    `explain`: a last column says, beside a share of the peak over 100%, which kernels passed their
    ceiling and why (the HTML report's first screen)."""
    headers = ["op", "prec", "kernels", "ok", "unsupported", "failed", "timeout", "TFLOP/s", "GB/s", "% peak", "flags"]
    rows = [
        [g.op, g.precision, str(len(g.entries)), str(g.counts.get("ok", 0))]
        + [str(g.counts[s]) if g.counts.get(s) else "" for s in STATUSES[1:]]
        + [
            fmt_sig(g.geomean_rate) if g.rate_unit == "TFLOP/s" else "",
            fmt_sig(g.geomean_rate) if g.rate_unit == "GB/s" else "",
            _pct(g.geomean_pct),
            flags_text(g.flags),
        ]
        + ([above_peak_text(g)] if explain else [])
        for g in gs
    ]
    return Table(
        "summary",
        "Summary per operation and precision (TFLOP/s, GB/s, % peak: geometric means)",
        headers + ([ABOVE_HEADER] if explain else []),
        rows,
        wrap=("flags", ABOVE_HEADER),
    )


def roof_table(gs: list[Group]) -> Table:
    """Per operation and precision, the kernel closest to the roof and the one furthest from it, among those
    at or under it (the summary says which passed it, and why)."""
    rows = [
        [
            g.op,
            g.precision,
            _pct(g.closest[1]),
            g.closest[0].kernel.label(),
            _pct(g.furthest[1]),
            g.furthest[0].kernel.label(),
        ]
        for g in gs
        if g.closest and g.furthest
    ]
    return Table(
        "roof",
        "Closest to and furthest from the roof (% of the measured peak, kernels at or under it)",
        ["op", "prec", "closest % peak", "closest kernel", "furthest % peak", "furthest kernel"],
        rows,
    )


def summary_line(gs: list[Group], suite: str = "") -> str:
    """One line: kernels by status, geomean throughput per operation and precision, flags."""
    counts = sum((g.counts for g in gs), Counter())
    marks = sum((g.flags for g in gs), Counter())
    n = sum(len(g.entries) for g in gs)
    rates = "; ".join(f"{g.op} {g.precision} {fmt_sig(g.geomean_rate)} {g.rate_unit}" for g in gs if g.geomean_rate)
    status = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts.get(s))
    text = f"{suite + ': ' if suite else ''}{n} kernels ({status})"
    if rates:
        text += f"; geomean {rates}"
    return text + (f"; flags: {flags_text(marks)}" if marks else "")
