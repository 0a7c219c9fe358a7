"""`deepbench compare` as tables (data), then terminal, Markdown, CSV or HTML."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console

from ..kernels.catalog import KERNEL_CLASSES
from .compare import Comparison, Ratio
from .sources import Source
from .display import PIPE_WIDTH, make_console, print_tables
from .html import page, table_html, table_section
from .tables import OP_TITLES, SET_SHORT, Table, _param, fmt_us
from .textformats import csv_text, markdown, markdown_table

FORMATS = ("table", "md", "csv", "html")
RULE = ("ratio = time / baseline time over the directions both timed (<1: faster than the baseline); "
        "interval: 95% bootstrap of both sides' raw samples (published figures: their 1 us rounding); "
        "same = interval within ±{t:.0%}, faster/slower = interval excludes 1 and the ratio is beyond ±{t:.0%}, "
        "else unclear")


def _fmt_ratio(r: Ratio | None) -> tuple[str, str, str]:
    if r is None:
        return "", "", ""
    interval = "" if math.isnan(r.low) else f"{r.low:.3f}-{r.high:.3f}"
    return f"{r.ratio:.3f}", interval, r.verdict


def compare_tables(cmp: Comparison) -> list[Table]:
    out = []
    multi = len(cmp.others) > 1
    for op in KERNEL_CLASSES:
        rows_in = [r for r in cmp.rows if r.any.kernel.op == op]
        if not rows_in:
            continue
        fields = list(KERNEL_CLASSES[op].FIELDS) + (["ranks"] if op == "all_reduce" else [])
        headers = ["set", "application"] + fields + ["prec", f"{cmp.base.label} (us)"]
        for o in cmp.others:
            tag = f" [{o.label}]" if multi else ""
            headers += [f"{o.label} prec" if not multi else f"prec{tag}", f"{o.label} (us)",
                        f"ratio{tag}", f"95% interval{tag}", f"verdict{tag}", f"note{tag}"]
        rows = []
        for r in rows_in:
            e = r.any
            app = e.kernel.application or e.extra.get("application", "")
            row = [SET_SHORT.get(e.kernel.set, e.kernel.set), app] + [_param(v) for v in e.kernel.params().values()]
            if op == "all_reduce":
                row.append(str(e.extra.get("ranks", "")))
            base = r.base
            row += [base.precision if base else "", _time(base)]
            for other, ratio in zip(r.others, r.ratios):
                ratio_txt, interval, verdict = _fmt_ratio(ratio)
                note = ratio.note if ratio else ("missing" if other is None else
                                                 f"{other.status}: {other.reason}" if not other.ok else
                                                 f"baseline {base.status}" if base and not base.ok else "")
                prec = ""
                if other is not None:
                    prec = other.precision + (f" ({other.precision_text})" if other.precision_text and
                                              other.precision_text != (base.precision_text if base else "") else "")
                row += [prec, _time(other), ratio_txt, interval, verdict, note]
            rows.append(row)
        out.append(Table(op, OP_TITLES.get(op, op), headers, rows))
    return out


def _time(e) -> str:
    if e is None:
        return ""
    return fmt_us(e.median_us) if e.ok else e.status


def summary_table(cmp: Comparison) -> Table:
    headers = ["source", "op", "kernels", "geomean ratio", "faster", "slower", "same", "unclear"]
    rows = [[s["source"], s["op"], str(s["kernels"]), f"{s['geomean']:.3f}", str(s["faster"]), str(s["slower"]),
             str(s["same"]), str(s["unclear"])] for s in cmp.summary()]
    return Table("summary", f"Summary against {cmp.base.label} (geometric mean of time ratios)", headers, rows)


def only_tables(cmp: Comparison) -> list[Table]:
    """Kernels one side lacks: what the baseline has and each other source lacks, and back."""
    out = []
    for i, other in enumerate(cmp.others):
        lacks = cmp.only_base[i]
        what = "the reference lacks" if other.kind == "reference" else f"{other.label} lacks"
        out.append(Table("only_base", f"Kernels {what} ({len(lacks)} of {cmp.base.label}'s)",
                         ["kernel", "prec", "parameters", "status"],
                         [[e.kernel.id, e.precision, e.kernel.label(), e.status] for e in lacks]))
        extra = cmp.only_other[i]
        out.append(Table("only_other_ref" if other.kind == "reference" else "only_other",
                         f"Kernels only {other.label} has ({len(extra)})",
                         ["kernel", "prec", "parameters", "status"],
                         [[e.kernel.id, e.precision, e.kernel.label(), e.status] for e in extra]))
    return out


def _kind(source: Source) -> str:
    """'run', 'reference', or 'run, emulated': an emulated run's times are the emulator's (qemu-user), not the chip's."""
    return source.kind + (", emulated" if source.specs.get("device.emulated") == "True" else "")


def heading(cmp: Comparison) -> str:
    others = ", ".join(f"{o.label} ({_kind(o)})" for o in cmp.others)
    emulated = [s.label for s in cmp.sources if s.specs.get("device.emulated") == "True"]
    return (f"baseline {cmp.base.label} ({_kind(cmp.base)}) against {others}; matched by "
            f"{'kernel id' if cmp.by == 'id' else 'DeepBench parameters'}"
            + (" across precisions" if cmp.any_precision else " and precision")
            + (f"; {', '.join(emulated)} ran emulated: faster/slower there says nothing of the hardware"
               if emulated else ""))


def render(cmp: Comparison, fmt: str, out: Path | None, max_only: int | None = None) -> str | None:
    tables = compare_tables(cmp)
    summary = summary_table(cmp)
    only = only_tables(cmp)
    rule = RULE.format(t=cmp.threshold)
    if fmt == "csv":
        text = csv_text(tables)
    elif fmt == "md":
        parts = ["# Comparison", heading(cmp), f"_{rule}_", f"## {summary.title}",
                 markdown_table(summary.headers, summary.rows), markdown(tables)]
        parts += [f"## {t.title}\n\n" + (markdown_table(t.headers, t.rows) if t.rows else "none") for t in only]
        text = "\n\n".join(parts) + "\n"
    elif fmt == "html":
        from .plots import ratio_bars_svg  # matplotlib: loaded only for HTML

        sections = [f"<h2>{summary.title}</h2>" + table_html(summary.headers, summary.rows, "table-summary")]
        for t in tables:
            charts = []
            for i, other in enumerate(cmp.others):
                rs = [(r, r.ratios[i]) for r in cmp.rows if r.any.kernel.op == t.op and r.ratios[i] is not None]
                svg = ratio_bars_svg(f"{t.op}: {other.label} / {cmp.base.label}",
                                     [f"{r.any.kernel.label()} {r.any.precision}" for r, _ in rs],
                                     [x.ratio for _, x in rs], [x.verdict for _, x in rs], salt=f"ratio-{t.op}-{i}")
                if svg:
                    charts.append(svg)
            sections.append(table_section(t, f"table-{t.op}", charts))
        sections += [f"<h2>{t.title}</h2>" + table_html(t.headers, t.rows, f"table-{t.op}-{i}")
                     for i, t in enumerate(only)]
        text = page("DeepBench comparison", sections, subtitle=f"{heading(cmp)}. {rule}.")
        out = out or Path("comparison.html")
    else:
        console = make_console() if out is None else None
        f = out.open("w") if out is not None else None
        try:
            console = console or Console(file=f, width=PIPE_WIDTH)
            console.print(f"[bold]{heading(cmp)}[/]")
            console.print(f"[dim]{rule}[/]")
            print_tables(console, tables)
            print_tables(console, [summary])
            for t in only:
                shown = t if max_only is None or len(t.rows) <= max_only else Table(
                    t.op, t.title + f", first {max_only} shown (all with --format md/csv)", t.headers, t.rows[:max_only])
                if t.rows and t.op != "only_other_ref":  # a reference's other kernels: the count is enough here
                    print_tables(console, [shown])
                else:
                    console.print(t.title if t.rows else f"{t.title}: none")
        finally:
            if f:
                f.close()
        return str(out) if out else None
    if out is None:
        print(text, end="")
        return None
    out.write_text(text)
    return str(out)
