"""Tables (runner.render.tables.Table) as Markdown and CSV text; the terminal uses runner.render.display."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from .tables import Table


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(tables: list[Table], level: int = 2) -> str:
    return "\n\n".join(f"{'#' * level} {t.title}\n\n{markdown_table(t.headers, t.rows)}" for t in tables)


def specs_markdown(specs: dict[str, str]) -> str:
    return markdown_table(["fact", "value"], [[k, v] for k, v in specs.items()])


def csv_text(tables: list[Table], lead: tuple[str, ...] = ("operation",)) -> str:
    """One CSV for all operations: the union of their columns (first-seen order), one row per
    kernel, the operation first, so that a spreadsheet or pandas reads it at once."""
    columns: list[str] = []
    for t in tables:
        columns += [h for h in t.headers if h not in columns]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(list(lead) + columns)
    for t in tables:
        for row in t.rows:
            cells = dict(zip(t.headers, row, strict=False))
            w.writerow([t.op] + [cells.get(c, "") for c in columns])
    return out.getvalue()
