"""The `xlsx` output format: an Excel workbook laid out like DeepBench's.

One module per format (runner/render_formats.py); the writers live beside the documents they
write (report_render.py, compare_render.py, commands/fastest.py)."""

from __future__ import annotations

from . import report_render
from .render_formats import REPORT, ReportFormat, register_format

register_format(ReportFormat("xlsx", {REPORT: report_render.workbook_report},
                            help="an Excel workbook laid out like DeepBench's"))
