"""The `html` output format: one offline HTML page: sortable tables, charts.

One module per format (runner/render_formats.py); the writers live beside the documents they
write (report_render.py, compare_render.py, commands/fastest.py)."""

from __future__ import annotations

from . import compare_render, report_render
from .commands import fastest
from .render_formats import COMPARE, FASTEST, REPORT, ReportFormat, register_format

register_format(ReportFormat("html", {REPORT: report_render.html_report, COMPARE: compare_render.html_comparison, FASTEST: fastest.html_fastest}, help="one offline HTML page: sortable tables, charts"))
