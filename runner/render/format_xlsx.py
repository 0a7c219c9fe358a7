"""The `xlsx` output format: an Excel workbook laid out like DeepBench's.

One module per format (runner/render/render_formats.py)."""

from __future__ import annotations

from pathlib import Path

from ..analysis.sources import Source
from .render_formats import REPORT, ReportFormat, register_format
from .report_render import default_path


def workbook_report(source: Source, out: Path | None, columns: list[str] | None = None) -> str | None:
    from .workbook import write_workbook  # openpyxl: loaded only when a workbook is written

    path = out or default_path(source, "xlsx")
    write_workbook(source, path)
    return str(path)


register_format(ReportFormat("xlsx", {REPORT: workbook_report}, help="an Excel workbook laid out like DeepBench's"))
