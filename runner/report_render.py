"""`deepbench report` in every format, from one Source (a run or a reference)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from .display import PIPE_WIDTH, make_console, print_tables
from .html import page, table_html, table_section
from .roofline import no_roof_reason
from .sources import Source
from .tables import Table, report_tables
from .textformats import csv_text, markdown, specs_markdown

FORMATS = ("table", "md", "csv", "xlsx", "html")
LEGEND = ("time: median per call over the directions' medians (us); IQR: interquartile range over the median; "
          "bound/% peak: roofline from the measured ceilings; marks: ~ unconverged, ± noisy, ! throttled")


def tables_of(source: Source) -> list[Table]:
    return report_tables(list(source.entries), source.ceilings)


def headline(source: Source) -> str:
    counts: dict[str, int] = {}
    for e in source.entries:
        counts[e.status] = counts.get(e.status, 0) + 1
    what = "published reference" if source.kind == "reference" else "run"
    device = source.specs.get("device.name") or source.specs.get("published.GPU Model") or \
        source.specs.get("published.CPU Model") or source.specs.get("published.CPU") or ""
    status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    if source.specs.get("device.emulated", "").lower() == "true":  # an arm64 image on an x86 host, say
        device = f"{device or 'a CPU'} (EMULATED {source.specs.get('device.machine', '')}: the emulator's times, " \
                 "not the hardware's)"
    return f"{what} {source.label}" + (f" on {device}" if device else "") + f": {status}"


def render_text(source: Source, fmt: str) -> str:
    tables = tables_of(source)
    roof_note = no_roof_reason(source.ceilings, source.kind)
    if fmt == "csv":
        return csv_text(tables)
    # md
    parts = [f"# DeepBench report: {source.label}", headline(source), f"_{LEGEND}_"]
    if roof_note:
        parts.append(f"Roofline columns are blank: {roof_note}.")
    parts += [markdown(tables), "## Specs", specs_markdown(source.specs)]
    return "\n\n".join(parts) + "\n"


def print_report(source: Source, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(f"[bold]{headline(source)}[/]")
    note = no_roof_reason(source.ceilings, source.kind)
    if note:
        console.print(f"[dim]roofline columns blank: {note}[/]")
    print_tables(console, tables_of(source))


def render_html(source: Source) -> str:
    from .plots import roofline_svg, time_bars_svg  # matplotlib: loaded only for HTML

    sections = []
    note = no_roof_reason(source.ceilings, source.kind)
    for i, t in enumerate(tables_of(source)):
        entries = [e for e in source.entries if e.kernel.op == t.op]
        charts = []
        if t.op != "all_reduce":
            roof = roofline_svg(t.op, entries, source.ceilings, salt=f"roof-{t.op}")
            if roof:
                charts.append(roof)
        bars = time_bars_svg(t.op, entries, salt=f"time-{t.op}")
        if bars:
            charts.append(bars)
        sections.append(table_section(t, f"table-{t.op}", charts, note))
    specs = [[k, v] for k, v in source.specs.items()] + [[f"measured ceiling {k}", f"{v:,.1f}"]
                                                         for k, v in source.ceilings.items()]
    sections.append("<h2>Specs</h2>" + table_html(["fact", "value"], specs, "table-specs"))
    return page(f"DeepBench report: {source.label}", sections, subtitle=f"{headline(source)}. {LEGEND}.")


def write_report(source: Source, fmt: str, out: Path | None) -> str | None:
    """Write or print the report; returns the path written, if any."""
    if fmt == "table":
        if out is None:
            print_report(source)
            return None
        with out.open("w") as f:
            print_report(source, Console(file=f, width=PIPE_WIDTH))
        return str(out)
    if fmt == "xlsx":
        from .workbook import write_workbook

        path = out or default_path(source, "xlsx")
        write_workbook(source, path)
        return str(path)
    if fmt == "html":
        text = render_html(source)
        out = out or default_path(source, "html")
    else:
        text = render_text(source, fmt)
    if out is None:
        print(text, end="")
        return None
    out.write_text(text)
    return str(out)


def default_path(source: Source, ext: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source.label)
    return Path(f"report-{safe}.{ext}")
