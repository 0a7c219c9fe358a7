"""`deepbench report` in every format, from one Source (a run or a reference)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..analysis.roofline import no_roof_reason
from ..analysis.sanity import context_of
from ..analysis.sources import Source
from ..analysis.summary import groups, roof_table, summary_line, summary_table
from . import render_formats
from .display import check_columns, make_console, print_tables
from .tables import Table, report_tables, without_empty_columns
from .textformats import csv_text, markdown, markdown_table, specs_markdown

LEGEND = (
    "time: median per call over the directions' medians (us); IQR: interquartile range over the median; "
    "bound/% peak: roofline from the measured ceilings; marks: ~ unconverged, ± noisy, ! throttled; "
    "notes: figures that cannot be true as they stand, with their likely cause"
)


def tables_of(source: Source) -> list[Table]:
    return report_tables(list(source.entries), context_of(source))


def device_of(source: Source) -> str:
    device = (
        source.specs.get("device.name")
        or source.specs.get("published.GPU Model")
        or source.specs.get("published.CPU Model")
        or source.specs.get("published.CPU")
        or ""
    )
    if source.specs.get("device.emulated", "").lower() == "true":  # an arm64 image on an x86 host, say
        device = (
            f"{device or 'a CPU'} (EMULATED {source.specs.get('device.machine', '')}: the emulator's times, "
            "not the hardware's)"
        )
    return device


def headline(source: Source) -> str:
    counts: dict[str, int] = {}
    for e in source.entries:
        counts[e.status] = counts.get(e.status, 0) + 1
    what = "published reference" if source.kind == "reference" else "run"
    device = device_of(source)
    status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return f"{what} {source.label}" + (f" on {device}" if device else "") + f": {status}"


def suite_of(source: Source) -> str:
    return source.specs.get("run.suite") or source.set or ""


def render_text(source: Source, fmt: str) -> str:
    tables = tables_of(source)
    if fmt == "csv":
        return csv_text(tables)
    ctx = context_of(source)
    gs = groups(list(source.entries), ctx)
    parts = [f"# DeepBench report: {source.label}", headline(source), summary_line(gs, suite_of(source))]
    parts += [f"**warning**: {w}" for w in source.warnings]
    parts.append(f"_{LEGEND}_")
    roof_note = no_roof_reason(source.ceilings, source.kind)
    if roof_note:
        parts.append(f"Roofline columns are blank: {roof_note}.")
    summary, roof = without_empty_columns(summary_table(gs)), roof_table(gs)
    parts += [f"## {summary.title}", markdown_table(summary.headers, summary.rows)]
    if roof.rows:
        parts += [f"## {roof.title}", markdown_table(roof.headers, roof.rows)]
    parts += [markdown(tables), "## Specs", specs_markdown(source.specs)]
    return "\n\n".join(parts) + "\n"


def print_report(source: Source, console: Console | None = None, columns: list[str] | None = None) -> None:
    console = console or make_console()
    tables = tables_of(source)
    check_columns(tables, columns)
    gs = groups(list(source.entries), context_of(source))
    console.print(f"[bold]{escape(headline(source))}[/]")
    for w in source.warnings:
        console.print(f"[yellow]warning: {escape(w)}[/]")
    note = no_roof_reason(source.ceilings, source.kind)
    if note:
        console.print(f"[dim]roofline columns blank: {escape(note)}[/]")
    print_tables(console, tables, columns)
    print_tables(console, [summary_table(gs)], columns)
    console.print(escape(summary_line(gs, suite_of(source))))


def write_report(source: Source, fmt: str, out: Path | None, columns: list[str] | None = None) -> str | None:
    """Write or print the report in a registered format (runner/render/render_formats.py); returns the
    path written, if any."""
    return render_formats.write(render_formats.REPORT, fmt, source, out, columns=columns)


# ----- the built-in formats' report writers (registered by runner/format_*.py) -------------------
def terminal_report(source: Source, out: Path | None, columns: list[str] | None = None) -> str | None:
    if out is None:
        print_report(source, columns=columns)
        return None
    with out.open("w") as f:
        print_report(source, make_console(file=f), columns)
    return str(out)


def markdown_report(source: Source, out: Path | None, columns: list[str] | None = None) -> str | None:
    return render_formats.emit(render_text(source, "md"), out)


def csv_report(source: Source, out: Path | None, columns: list[str] | None = None) -> str | None:
    return render_formats.emit(render_text(source, "csv"), out)


def default_path(source: Source, ext: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source.label)
    return Path(f"report-{safe}.{ext}")
