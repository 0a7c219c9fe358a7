"""`deepbench fastest` as terminal tables, Markdown, CSV or an HTML page (the writers that the
format modules, runner/render/format_*.py, register for the `fastest` document)."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from ..analysis.sources import Source, label_line
from . import render_formats
from .display import check_columns, make_console, print_tables
from .html import Section, page, table_html, table_section, warnings_html
from .tables import Table
from .textformats import csv_text, markdown


def terminal_fastest(
    tables: list[Table], summary: Table, sources: list[Source], out: Path | None, columns: list[str] | None = None
) -> str | None:
    check_columns(tables, columns)
    f = out.open("w") if out else None
    try:
        console = make_console(file=f)
        console.print(escape(label_line(sources)))
        for s in sources:
            for w in s.warnings:
                console.print(f"[yellow]warning: {s.label} was measured on a loaded machine: {w}[/]")
        print_tables(console, [*tables, summary], columns)
    finally:
        if f:
            f.close()
    return str(out) if out else None


def csv_fastest(
    tables: list[Table], summary: Table, sources: list[Source], out: Path | None, columns: list[str] | None = None
) -> str | None:
    return render_formats.emit(csv_text(tables), out)


def markdown_fastest(
    tables: list[Table], summary: Table, sources: list[Source], out: Path | None, columns: list[str] | None = None
) -> str | None:
    return render_formats.emit(f"{label_line(sources)}\n\n" + markdown([*tables, summary]) + "\n", out)


def html_fastest(
    tables: list[Table], summary: Table, sources: list[Source], out: Path | None, columns: list[str] | None = None
) -> str | None:
    return render_formats.emit(html_page(tables, summary, sources), out)


def html_page(tables: list[Table], summary: Table, sources: list[Source]) -> str:
    """Wins per operation first (a grouped bar chart and its table), then each operation's table."""
    from .plots import grouped_bars  # plotly: loaded only for HTML

    ops = [t.op for t in tables]
    series = {
        s.label: [float(r[2]) for op in ops for r in summary.rows if r[0] == op and r[1] == s.label] for s in sources
    }
    chart = grouped_bars("Kernels each source ran fastest, per operation", ops, series, "kernels", "wins")
    sections = [
        Section(
            "summary",
            summary.title,
            f'<div class="charts">{chart}</div>' + table_html(summary.headers, summary.rows, "table-wins"),
        )
    ]
    for t in tables:
        section = table_section(t, f"table-{t.op}", anchor=f"op-{t.op}")
        sections.append(Section(section.anchor, f"{t.title} ({len(t.rows)})", section.html))
    lead = warnings_html([f"{s.label} was measured on a loaded machine: {w}" for s in sources for w in s.warnings])
    return page("DeepBench: fastest per kernel", sections, subtitle=label_line(sources), lead=lead, charts=True)
