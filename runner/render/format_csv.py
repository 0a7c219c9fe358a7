"""The `csv` output format: CSV, one block per table.

One module per format (runner/render/render_formats.py); the writers live beside the documents they
write (report_render.py, compare_render.py, fastest_render.py)."""

from __future__ import annotations

from . import compare_render, fastest_render, report_render
from .render_formats import COMPARE, FASTEST, REPORT, ReportFormat, register_format

register_format(
    ReportFormat(
        "csv",
        {REPORT: report_render.csv_report, COMPARE: compare_render.csv_comparison, FASTEST: fastest_render.csv_fastest},
        help="CSV, one block per table",
    )
)
