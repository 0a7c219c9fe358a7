"""Fastest source per kernel across runs and references, like the tables in DeepBench's README
(which processor ran each kernel fastest, its time and throughput, and the runner-up: "H200:
1.30x slower", naming both sides as every comparison does)."""

from __future__ import annotations

from deepbench.kernels.catalog import KERNEL_CLASSES, traits_of
from deepbench.kernels.op_traits import Rate

from ..render.tables import SET_SHORT, Table, _param, fmt_sig, fmt_us
from .compare import match_mode, speed
from .sources import Entry, Source


def fastest_tables(sources: list[Source], by: str | None = None, any_precision: bool = False,
                   all_kernels: bool = False) -> list[Table]:
    """One table per operation. With runs among the sources, only the kernels some run has
    (the references then say how fast others were on them) unless `all_kernels`."""
    by = by or match_mode(sources)
    runs = [i for i, s in enumerate(sources) if s.kind == "run"]
    keyed: dict[tuple, list[Entry | None]] = {}
    for i, s in enumerate(sources):
        for e in s.entries:
            k = e.key(by)
            k = k[:-1] if any_precision else k
            slot = keyed.setdefault(k, [None] * len(sources))
            if slot[i] is None:
                slot[i] = e
    out = []
    for op in KERNEL_CLASSES:
        traits = traits_of(op)
        headers = (["set", "application"] + list(KERNEL_CLASSES[op].FIELDS)
                   + (["ranks"] if traits.collective else []) + ["prec"]
                   + [f"{s.label} (us)" for s in sources] + ["fastest", "time (us)", traits.rated_in.column,
                                                              "runner-up"])
        rows = []
        for entries in keyed.values():
            first = next(e for e in entries if e is not None)
            if first.kernel.op != op or (runs and not all_kernels and all(entries[i] is None for i in runs)):
                continue
            timed = sorted(((e.median_us, i) for i, e in enumerate(entries)
                            if e is not None and e.ok and e.median_us is not None), key=lambda t: t[0])
            row = [SET_SHORT.get(first.kernel.set, first.kernel.set),
                   first.kernel.application or first.extra.get("application", "")]
            row += [_param(v) for v in first.kernel.params().values()]
            if traits.collective:
                row.append(str(first.extra.get("ranks", "")))
            row.append("/".join(sorted({e.precision for e in entries if e is not None})))
            row += [("" if e is None else fmt_us(e.median_us) if e.ok else e.status) for e in entries]
            if timed:
                best = entries[timed[0][1]]
                assert best is not None  # timed holds entries that are there
                rate = best.gbps if traits.rated_in is Rate.GBPS else best.tflops
                second = f"{sources[timed[1][1]].label}: {speed(timed[1][0] / timed[0][0])}" if len(timed) > 1 else ""
                row += [sources[timed[0][1]].label, fmt_us(best.median_us), fmt_sig(rate), second]
            else:
                row += ["", "", "", ""]
            rows.append(row)
        if rows:
            out.append(Table(op, f"{traits.title}: fastest per kernel", headers, rows,
                             ("set", "application", *(f"{s.label} (us)" for s in sources))))
    return out


def wins(tables: list[Table], sources: list[Source]) -> Table:
    """How many kernels each source ran fastest, per operation."""
    rows = []
    for t in tables:
        col = t.headers.index("fastest")
        for s in sources:
            n = sum(1 for r in t.rows if r[col] == s.label)
            rows.append([t.op, s.label, str(n), str(len(t.rows))])
    return Table("wins", "Kernels each source ran fastest", ["op", "source", "fastest", "kernels"], rows)
