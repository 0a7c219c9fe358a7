"""The `html` output format: one offline HTML page: sortable tables, charts.

One module per format (runner/render/render_formats.py); the comparison's and fastest's writers live beside
the documents they write (compare_render.py, fastest_render.py)."""

from __future__ import annotations

from pathlib import Path

from ..analysis.sources import Source
from . import compare_render, fastest_render, render_formats
from .render_formats import COMPARE, FASTEST, REPORT, ReportFormat, register_format
from .report_render import default_path


def html_report(source: Source, out: Path | None, columns: list[str] | None = None) -> str | None:
    from .report_html import render_html  # plotly: loaded only when an HTML report is written

    return render_formats.emit(render_html(source), out or default_path(source, "html"))


register_format(
    ReportFormat(
        "html",
        {REPORT: html_report, COMPARE: compare_render.html_comparison, FASTEST: fastest_render.html_fastest},
        help="one offline HTML page: sortable tables, charts",
    )
)
