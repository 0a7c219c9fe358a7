"""`deepbench compare` as tables (data), then terminal, Markdown, CSV or HTML.

Every comparison names both sides and the baseline, in every format: headings say "baseline:
X", columns are "Y vs X" and hold "6.30x faster" (Y is 6.3 times as fast as X), never a bare
"faster" or a ratio whose direction the reader must guess."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from rich.markup import escape as rich_escape

from deepbench.kernels.catalog import KERNEL_CLASSES, traits_of

from ..analysis.compare import Comparison, Ratio, Row, phrase, versus
from ..analysis.flagged import flagged_text
from ..analysis.like_for_like import energy_ratio
from ..analysis.sources import Entry, Source, label_line
from . import render_formats
from .display import check_columns, make_console, print_tables
from .html import Section, page, table_html, table_section, warnings_html
from .tables import SET_SHORT, Table, _param, fmt_us
from .textformats import csv_text, markdown, markdown_table

RULE = (
    "times are medians (a reference: its published figure), summed over the directions every source timed "
    "(a row's note names them when one is left out); ratio = time / baseline time, and the verdict says the "
    "other side's speed: '2.00x faster' is half the baseline's time (ratio 0.5); "
    "interval: 95% bootstrap of both sides' raw samples (published figures: their 1 us rounding); "
    "same = interval within ±{t:.0%}, faster/slower = interval excludes 1 and the ratio is beyond ±{t:.0%}, "
    "else unclear"
)


def _fmt_ratio(r: Ratio | None) -> tuple[str, str, str]:
    if r is None:
        return "", "", ""
    interval = "" if math.isnan(r.low) else f"{r.low:.3f}-{r.high:.3f}"
    return f"{r.ratio:.3f}", interval, phrase(r)


def compare_tables(cmp: Comparison) -> list[Table]:
    """Per operation: the kernel, the baseline's time, then per other source its time, the time
    ratio other/baseline, its interval, the verdict in words ("H100 vs V100": "6.30x faster")
    and a note. When the baseline is a published reference, only the kernels some other source
    has are rows (the reference's other kernels are counted apart)."""
    out = []
    for op in KERNEL_CLASSES:
        rows_in = [
            r
            for r in cmp.rows
            if r.any.kernel.op == op and (cmp.base.kind != "reference" or any(o is not None for o in r.others))
        ]
        if not rows_in:
            continue
        # --energy: the energy-per-call ratio beside the time ratio, for the sides where some row has it on both
        energy = [any(energy_ratio(r.base, r.others[i]) is not None for r in rows_in) for i in range(len(cmp.others))]
        headers, droppable = _headers(cmp, op, energy)
        rows = [_row(cmp, r, traits_of(op).collective, energy) for r in rows_in]
        out.append(Table(op, traits_of(op).title, headers, rows, tuple(droppable)))
    return out


def _headers(cmp: Comparison, op: str, energy: list[bool]) -> tuple[list[str], list[str]]:
    """An operation's table headers, and those a narrow terminal may drop (least needed first)."""
    multi, base = len(cmp.others) > 1, cmp.base.label
    collective = traits_of(op).collective  # matched by rank count: the ranks are a column
    fields = list(KERNEL_CLASSES[op].FIELDS) + (["ranks"] if collective else [])
    words = cmp.base.kind == "reference"  # a published baseline: its sheet's own precision words beside ours
    headers = ["set", "application"] + fields + ["prec"] + ([f"{base} prec"] if words else []) + [f"{base} (us)"]
    droppable = ["set", "application"] + ([f"{base} prec"] if words else [])
    for o, with_energy in zip(cmp.others, energy, strict=True):
        tag = f" [{o.label}]" if multi else ""
        headers += [
            f"{o.label} prec" if not multi else f"prec{tag}",
            f"{o.label} (us)",
            f"ratio {o.label}/{base}",
            *([energy_header(o.label, base)] if with_energy else []),
            f"95% interval{tag}",
            versus(o, cmp.base),
            f"note{tag}",
        ]
        droppable = ([energy_header(o.label, base)] if with_energy else []) + droppable
        droppable += [
            f"95% interval{tag}",
            f"{o.label} prec" if not multi else f"prec{tag}",
            f"ratio {o.label}/{base}",
        ]
    return headers, droppable


def _row(cmp: Comparison, r: Row, collective: bool, energy: list[bool]) -> list[str]:
    """One kernel's row: its parameters, the baseline's time, then each other source's cells."""
    e = r.any
    app = e.kernel.application or e.extra.get("application", "")
    row = [SET_SHORT.get(e.kernel.set, e.kernel.set), app] + [_param(v) for v in e.kernel.params().values()]
    if collective:
        row.append(str(e.extra.get("ranks", "")))
    b = r.base
    compared = next((x for x in r.ratios if x is not None), None)  # every ratio: the same directions
    row += [b.precision if b else ""] + ([_prec_words(b)] if cmp.base.kind == "reference" else [])
    row += [_time(b, compared.base_us if compared else None)]
    for other, ratio, label, with_energy in zip(
        r.others, r.ratios, (o.label for o in cmp.others), energy, strict=False
    ):
        row += _other_cells(cmp.base.label, b, other, ratio, label, with_energy)
    return row


def _other_cells(
    base: str, b: Entry | None, other: Entry | None, ratio: Ratio | None, label: str, with_energy: bool
) -> list[str]:
    """One other source's cells in a row: its precision, time, ratio, energy ratio, interval, verdict, note."""
    ratio_txt, interval, verdict = _fmt_ratio(ratio)
    note = (
        ratio.note
        if ratio
        else (
            "missing"
            if other is None
            else f"{other.status}: {other.reason}"
            if not other.ok
            else f"baseline {b.status}"
            if b and not b.ok
            else ""
        )
    )
    prec = ""
    if other is not None:
        prec = other.precision + (
            f" ({other.precision_text})"
            if other.precision_text and other.precision_text != (b.precision_text if b else "")
            else ""
        )
    doubts = "; ".join(d for d in (flagged_text(base, b), flagged_text(label, other)) if d)
    note = "; ".join(n for n in (note, doubts) if n)
    joules = energy_ratio(b, other) if with_energy else None
    energy_txt = [] if not with_energy else ["" if joules is None else f"{joules:.3f}"]
    return [prec, _time(other, ratio.other_us if ratio else None), ratio_txt, *energy_txt, interval, verdict, note]


def energy_header(label: str, base: str) -> str:
    """The energy-per-call ratio's column: other side's joules per call over the baseline's."""
    return f"J/call {label}/{base}"


def _prec_words(e: Entry | None) -> str:
    return "" if e is None else e.precision + (f" ({e.precision_text})" if e.precision_text else "")


def _time(e: Entry | None, compared_us: float | None) -> str:
    """The time a ratio was computed from (its directions' medians summed), else the entry's own."""
    if e is None:
        return ""
    return fmt_us(compared_us if compared_us is not None else e.median_us) if e.ok else e.status


def summary_table(cmp: Comparison) -> Table:
    headers = ["comparison", "op", "kernels", "geomean ratio", "answer", "faster", "slower", "same", "unclear"]
    rows = [
        [
            s["versus"],
            s["op"],
            str(s["kernels"]),
            f"{s['geomean']:.3f}",
            s["answer"],
            str(s["faster"]),
            str(s["slower"]),
            str(s["same"]),
            str(s["unclear"]),
        ]
        for s in cmp.summary()
    ]
    return Table(
        "summary",
        f"Summary against the baseline {cmp.base.label} (geometric mean of time ratios)",
        headers,
        rows,
        droppable=("geomean ratio",),  # the answer says it in words: "19.03x slower"
    )


def answers(cmp: Comparison) -> list[str]:
    """One line per other source over all kernels: 'H100 vs V100: 6.30x faster (geomean of ...)'."""
    out = []
    for s in cmp.summary():
        if s["op"] == "all":
            counts = ", ".join(f"{s[v]} {v}" for v in ("faster", "slower", "same", "unclear") if s[v])
            out.append(f"{s['versus']}: {s['answer']} (geometric mean over {s['kernels']} kernels; {counts})")
    return out


def only_tables(cmp: Comparison) -> list[Table]:
    """Kernels one side lacks: what the baseline has and each other source lacks, and back."""
    out = []
    for i, other in enumerate(cmp.others):
        lacks = cmp.only_base[i]
        what = "the reference lacks" if other.kind == "reference" else f"{other.label} lacks"
        out.append(
            Table(
                "only_base_ref" if cmp.base.kind == "reference" else "only_base",
                f"Kernels {what} ({len(lacks)} of {cmp.base.label}'s)",
                ["kernel", "prec", "parameters", "status"],
                [[e.kernel.id, e.precision, e.kernel.label(), e.status] for e in lacks],
            )
        )
        extra = cmp.only_other[i]
        out.append(
            Table(
                "only_other_ref" if other.kind == "reference" else "only_other",
                f"Kernels only {other.label} has ({len(extra)})",
                ["kernel", "prec", "parameters", "status"],
                [[e.kernel.id, e.precision, e.kernel.label(), e.status] for e in extra],
            )
        )
    return out


def _kind(source: Source) -> str:
    """'run', 'reference', or 'run, emulated': an emulated run's times are the emulator's (qemu-user),
    not the chip's."""
    return source.kind + (", emulated" if source.specs.get("device.emulated") == "True" else "")


def heading(cmp: Comparison) -> str:
    others = ", ".join(f"{o.label} ({_kind(o)})" for o in cmp.others)
    emulated = [s.label for s in cmp.sources if s.specs.get("device.emulated") == "True"]
    return (
        f"baseline: {cmp.base.label} ({_kind(cmp.base)}); compared with it: {others}; matched by "
        f"{'kernel id' if cmp.by == 'id' else 'DeepBench parameters'}"
        + (" across precisions" if cmp.any_precision else " and precision")
        + (
            f"; {', '.join(emulated)} ran emulated: faster/slower there says nothing of the hardware"
            if emulated
            else ""
        )
        + f"; {label_line(cmp.sources)}"
        + (f"; what differs: {'; '.join(d.text() for d in cmp.differences)}" if cmp.differences else "")
    )


def loaded(cmp: Comparison) -> list[str]:
    """A side measured on a loaded machine (its run's noise record) makes every ratio doubtful."""
    return [f"{s.label} was measured on a loaded machine: {w}" for s in cmp.sources for w in s.warnings]


def _html(cmp: Comparison, tables: list[Table], summary: Table, only: list[Table], rule: str) -> str:
    from .plots import speedups  # plotly: loaded only for HTML

    lead = "".join(f'<p class="answer">{escape(a)}</p>' for a in answers(cmp)) + warnings_html(loaded(cmp))
    sections = [Section("summary", "Summary", table_html(summary.headers, summary.rows, "table-summary"))]
    for t in tables:
        charts = []
        for i, other in enumerate(cmp.others):
            rs = [(r, x) for r in cmp.rows if r.any.kernel.op == t.op and (x := r.ratios[i]) is not None]
            chart = speedups(
                f"{t.op}: {versus(other, cmp.base)}<br>per kernel; above 1: {other.label} is faster",
                [f"{r.any.kernel.label()} {r.any.precision}" for r, _ in rs],
                [x.base_us for _, x in rs],
                [x.ratio for _, x in rs],
                [x.verdict for _, x in rs],
                [phrase(x) for _, x in rs],
                other.label,
                cmp.base.label,
                f"speed-{t.op}-{i}",
            )
            if chart:
                charts.append(chart)
        section = table_section(t, f"table-{t.op}", charts, anchor=f"op-{t.op}")
        sections.append(Section(section.anchor, f"{t.title} ({len(t.rows)})", section.html))
    for i, t in enumerate(only):
        sections.append(Section(f"only-{i}", t.title, table_html(t.headers, t.rows, f"table-only-{i}")))
    return page(
        "DeepBench comparison",
        sections,
        subtitle=f"{heading(cmp)}. {rule}.",
        lead=lead,
        charts=any("plotly-graph-div" in s.html for s in sections),
    )


def render(
    cmp: Comparison, fmt: str, out: Path | None, max_only: int | None = None, columns: list[str] | None = None
) -> str | None:
    """Write or print the comparison in a registered format (runner/render/render_formats.py)."""
    return render_formats.write(render_formats.COMPARE, fmt, cmp, out, max_only=max_only, columns=columns)


# ----- the built-in formats' comparison writers (registered by runner/format_*.py) ----------------
def csv_comparison(
    cmp: Comparison, out: Path | None, max_only: int | None = None, columns: list[str] | None = None
) -> str | None:
    return render_formats.emit(csv_text(compare_tables(cmp)), out)


def html_comparison(
    cmp: Comparison, out: Path | None, max_only: int | None = None, columns: list[str] | None = None
) -> str | None:
    text = _html(cmp, compare_tables(cmp), summary_table(cmp), only_tables(cmp), RULE.format(t=cmp.threshold))
    return render_formats.emit(text, out or Path("comparison.html"))


def markdown_comparison(
    cmp: Comparison, out: Path | None, max_only: int | None = None, columns: list[str] | None = None
) -> str | None:
    tables, summary, only = compare_tables(cmp), summary_table(cmp), only_tables(cmp)
    rule = RULE.format(t=cmp.threshold)
    parts = ["# Comparison", heading(cmp)] + [f"**{a}**" for a in answers(cmp)]
    parts += [f"**warning**: {w}" for w in loaded(cmp)]
    parts += [f"_{rule}_", f"## {summary.title}", markdown_table(summary.headers, summary.rows), markdown(tables)]
    parts += [f"## {t.title}\n\n" + (markdown_table(t.headers, t.rows) if t.rows else "none") for t in only]
    return render_formats.emit("\n\n".join(parts) + "\n", out)


def terminal_comparison(
    cmp: Comparison, out: Path | None, max_only: int | None = None, columns: list[str] | None = None
) -> str | None:
    tables, summary, only = compare_tables(cmp), summary_table(cmp), only_tables(cmp)
    rule = RULE.format(t=cmp.threshold)
    check_columns(tables, columns)
    f = out.open("w") if out is not None else None
    try:
        console = make_console(file=f)
        console.print(f"[bold]{rich_escape(heading(cmp))}[/]")
        for a in answers(cmp):
            console.print(f"[bold]{rich_escape(a)}[/]")
        for w in loaded(cmp):
            console.print(f"[yellow]warning: {rich_escape(w)}[/]")
        console.print(f"[dim]{rich_escape(rule)}[/]")
        print_tables(console, tables, columns)
        print_tables(console, [summary], columns)
        for t in only:
            shown = (
                t
                if max_only is None or len(t.rows) <= max_only
                else Table(
                    t.op, t.title + f", first {max_only} shown (all with --format md/csv)", t.headers, t.rows[:max_only]
                )
            )
            if t.rows and not t.op.endswith("_ref"):  # a reference's other kernels: the count is enough here
                print_tables(console, [shown], columns)
            else:
                console.print(rich_escape(t.title if t.rows else f"{t.title}: none"))
    finally:
        if f:
            f.close()
    return str(out) if out else None
