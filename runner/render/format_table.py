"""The `table` output format: terminal tables, fitted to the terminal's width.

One module per format (runner/render/render_formats.py); the writers live beside the documents they
write (report_render.py, compare_render.py, fastest_render.py)."""

from __future__ import annotations

from . import compare_render, fastest_render, report_render
from .render_formats import COMPARE, FASTEST, REPORT, ReportFormat, register_format

register_format(
    ReportFormat(
        "table",
        {
            REPORT: report_render.terminal_report,
            COMPARE: compare_render.terminal_comparison,
            FASTEST: fastest_render.terminal_fastest,
        },
        help="terminal tables, fitted to the terminal's width",
    )
)
