"""Fastest source per kernel across runs and references, like the tables in DeepBench's README
(which processor ran each kernel fastest, its time and throughput, and the runner-up: "H200:
1.30x slower", naming both sides as every comparison does).

Ranked on the comparison core (runner/analysis/compare.py): kernels matched as `compare` matches
them, every source's time summed over the directions all of them timed (named in the row's
"on" column when that leaves a direction out), runs and references alike. A collective on one
rank is not ranked: it moves no data, so its time is the library's local cost and it has no
bandwidth to show."""

from __future__ import annotations

from deepbench.kernels.catalog import KERNEL_CLASSES, traits_of
from deepbench.kernels.op_traits import Rate

from ..render.tables import SET_SHORT, Table, _param, fmt_sig, fmt_us
from .compare import directions_of, match, match_mode, pick, speed
from .flagged import flagged_text
from .sanity import one_rank
from .sources import Entry, Source

ONE_RANK_NOTE = "one rank: no data moves, not ranked"
NOTHING_COMMON = "no direction timed by all: not ranked"
MIN_SOURCES = 2
LEAST_ENERGY, LEAST_JOULES = "least energy", "its J/call"  # the energy columns (--energy on two sources)


def _rate(e: Entry, directions: tuple[str, ...], us: float, rated_in: Rate) -> float | None:
    """The winner's throughput on the directions compared: its own figure when those are all it
    timed, else the FLOPs of those directions over their time (bytes are not split by direction)."""
    if set(directions) == set(e.parts_us):
        return e.gbps if rated_in is Rate.GBPS else e.tflops
    if rated_in is Rate.GBPS:
        return None
    flops = sum(e.kernel.flops(d) for d in directions if d in e.kernel.DIRECTIONS)
    return flops / us / 1e6 if flops and us > 0 else None


def least_energy(ok: list[tuple[int, Entry]], sources: list[Source]) -> list[str]:
    """--energy: the source that spent the fewest joules per call on the kernel and that figure,
    where at least two sources measured energy for it (else blanks: one side has nothing to beat)."""
    measured = [(e.extra["joules_per_call"], i) for i, e in ok if e.extra.get("joules_per_call")]
    if len(measured) < MIN_SOURCES:
        return ["", ""]
    joules, i = min(measured)
    return [sources[i].label, fmt_sig(joules)]


def fastest_tables(
    sources: list[Source], by: str | None = None, any_precision: bool = False, all_kernels: bool = False
) -> list[Table]:
    """One table per operation. With runs among the sources, only the kernels some run has
    (the references then say how fast others were on them) unless `all_kernels`."""
    by = by or match_mode(sources)
    runs = [i for i, s in enumerate(sources) if s.kind == "run"]
    out = []
    rows_by_op: dict[str, list[list[str]]] = {op: [] for op in KERNEL_CLASSES}
    for slots in match(sources, by, any_precision).values():
        entries = pick(slots)
        first = next(e for e in entries if e is not None)
        if runs and not all_kernels and all(entries[i] is None for i in runs):
            continue
        traits = traits_of(first.kernel.op)
        ok = [(i, e) for i, e in enumerate(entries) if e is not None and e.ok]
        dirs = directions_of([e for _, e in ok])
        times: dict[int, float] = {i: dirs.us(j, e) for j, (i, e) in enumerate(ok)} if dirs else {}
        row = [
            SET_SHORT.get(first.kernel.set, first.kernel.set),
            first.kernel.application or first.extra.get("application", ""),
        ]
        row += [_param(v) for v in first.kernel.params().values()]
        if traits.collective:
            row.append(str(first.extra.get("ranks", "")))
        row.append("/".join(sorted({e.precision for e in entries if e is not None})))
        row += [
            ("" if e is None else fmt_us(times.get(i, e.median_us)) if e.ok else e.status)
            for i, e in enumerate(entries)
        ]
        row.append("+".join(dirs.common) if dirs and dirs.note else "")
        note = ONE_RANK_NOTE if one_rank(first) else NOTHING_COMMON if len(ok) > 1 and dirs is None else ""
        ranked = sorted(times.items(), key=lambda t: t[1]) if not note else []
        doubts = "; ".join(d for i, e in ok if (d := flagged_text(sources[i].label, e)))
        if ranked:
            (i0, t0), best = ranked[0], entries[ranked[0][0]]
            assert best is not None and dirs is not None  # ranked holds entries that are there
            rate = _rate(best, dirs.per_entry[[i for i, _ in ok].index(i0)], t0, traits.rated_in)
            second = f"{sources[ranked[1][0]].label}: {speed(ranked[1][1] / t0)}" if len(ranked) > 1 else ""
            compared = dirs.note if dirs.note.startswith("compared") else ""
            row += [sources[i0].label, fmt_us(t0), fmt_sig(rate), second, *least_energy(ok, sources)]
            row.append("; ".join(n for n in (compared, doubts) if n))
        else:
            row += ["", "", "", "", "", "", "; ".join(n for n in (note, doubts) if n)]
        rows_by_op[first.kernel.op].append(row)
    for op, rows in rows_by_op.items():
        if not rows:
            continue
        traits = traits_of(op)
        energy = [LEAST_ENERGY, LEAST_JOULES] if any(r[-3] for r in rows) else []
        if not energy:  # no kernel with energy on two sources: no energy columns
            rows = [r[:-3] + r[-1:] for r in rows]
        headers = (
            ["set", "application"]
            + list(KERNEL_CLASSES[op].FIELDS)
            + (["ranks"] if traits.collective else [])
            + ["prec"]
            + [f"{s.label} (us)" for s in sources]
            + ["on", "fastest", "time (us)", traits.rated_in.column, "runner-up", *energy, "note"]
        )
        out.append(
            Table(
                op,
                f"{traits.title}: fastest per kernel",
                headers,
                rows,
                (*energy, "set", "application", *(f"{s.label} (us)" for s in sources)),
            )
        )
    return out


def wins(tables: list[Table], sources: list[Source]) -> Table:
    """How many kernels each source ran fastest, per operation (of the kernels ranked)."""
    rows = []
    for t in tables:
        col = t.headers.index("fastest")
        ranked = sum(1 for r in t.rows if r[col])
        for s in sources:
            n = sum(1 for r in t.rows if r[col] == s.label)
            rows.append([t.op, s.label, str(n), str(ranked)])
    return Table("wins", "Kernels each source ran fastest", ["op", "source", "fastest", "ranked"], rows)
