"""One statistic per view (issue 45): the same record shows the same median, labelled as a
median, in the run's per-kernel lines, its end-of-run tables, `report` (terminal and CSV), the
HTML report and the workbook; the all-reduce's out-of-place figure likewise (it used to read as
a mean over ranks at the end of the run and a median in the report); and the flags' marks are in
the workbook's and the CSV's status as in the terminal's."""

from __future__ import annotations

import csv
import io
from html.parser import HTMLParser
from pathlib import Path

import pytest

from deepbench.runner.analysis.sources import Entry, load_run
from deepbench.runner.render.tables import OUT_OF_PLACE_HEADER, TIME_HEADER, _param, fmt_us, status_text

from .conftest import run_cli

WIDE = {"COLUMNS": "400"}  # one line per row: the text tables are read back cell by cell
SEP, RULE = "│", "━"


def text_tables(text: str) -> list[list[dict[str, str]]]:
    """Every table drawn in `text` (one line per row) as rows of header -> cell."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if RULE not in line:
            continue
        headers = [h.strip() for h in lines[i - 1].split(SEP)]
        rows = []
        for row in lines[i + 1 :]:
            if SEP not in row:
                break
            rows.append(dict(zip(headers, (c.strip() for c in row.split(SEP)), strict=False)))
        out.append(rows)
    return out


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_tables(text: str) -> list[list[dict[str, str]]]:
    parser = _Tables()
    parser.feed(text)
    return [[dict(zip(t[0], r, strict=False)) for r in t[1:]] for t in parser.tables if t]


def _matches(row: dict[str, str], e: Entry) -> bool:
    """The row of this kernel: its precision and parameters (the all-reduce's run table shows
    DeepBench's size and the ranks, not the precision or the repeat count)."""
    params = {f: _param(v) for f, v in e.kernel.params().items() if f in row}
    return bool(params) and row.get("prec", e.precision) == e.precision and all(row[f] == v for f, v in params.items())


def _rows_of(tables: list[list[dict[str, str]]], e: Entry) -> list[dict[str, str]]:
    return [r for t in tables for r in t if _matches(r, e)]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("one-statistic") / "run"
    p = run_cli("deepbench-run", "--local", "--suite", "smoke", "--fast", "--out", str(out), env=WIDE, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return out, p.stdout


@pytest.mark.slow
def test_the_same_median_in_every_view(smoke: tuple[Path, str], tmp_path: Path) -> None:
    import openpyxl

    folder, run_output = smoke
    entries = [e for e in load_run(folder).entries if e.ok]
    assert entries
    report_text = run_cli("deepbench", "report", str(folder), env=WIDE).stdout
    csv_text = run_cli("deepbench", "report", str(folder), "--format", "csv").stdout
    report_csv = list(csv.DictReader(io.StringIO(csv_text)))
    html_out, xlsx_out = tmp_path / "r.html", tmp_path / "r.xlsx"
    for fmt, path in (("html", html_out), ("xlsx", xlsx_out)):
        assert run_cli("deepbench", "report", str(folder), "--format", fmt, "--out", str(path)).returncode == 0
    run_rows, report_rows = text_tables(run_output), text_tables(report_text)
    html_rows = html_tables(html_out.read_text())
    sheets = openpyxl.load_workbook(xlsx_out)
    for e in entries:
        median = fmt_us(e.median_us)
        rid = f"{e.kernel.id}/{e.precision}"
        assert any(rid in line and f"median {median} us" in line for line in run_output.splitlines()), rid
        end = _rows_of(run_rows, e)
        assert end, rid
        views = {
            "report": _rows_of(report_tables_only(report_rows), e),
            "csv": [r for r in report_csv if r["operation"] == e.kernel.op and _matches(r, e)],
            "html": _rows_of(html_rows, e),
        }
        for view, rows in views.items():
            assert rows and all(r[TIME_HEADER] == median for r in rows), (view, rid, rows)
            assert all(r["status"] == status_text(e) for r in rows), (view, rid)  # marks included
        if e.kernel.op == "all_reduce":
            twin = fmt_us(e.extra["out_of_place_us"])
            assert all(r["in-place median (us)"] == median and r["out-of-place median (us)"] == twin for r in end)
            assert all(r[OUT_OF_PLACE_HEADER] == twin for r in views["report"] + views["csv"] + views["html"])
        else:
            assert all(r[TIME_HEADER] == median for r in end), (rid, end)
        found = []
        for ws in sheets.worksheets[:-1]:
            if not ws.title.endswith(e.precision):
                continue
            header: list = []
            for values in ws.iter_rows(values_only=True):
                if values and values[0] is not None and any(str(v).startswith("Median") for v in values if v):
                    header = list(values)
                    continue
                if header and values[0] is None and len(values) > 2 and values[2] is not None:
                    col = next(i for i, h in enumerate(header) if str(h).startswith("Median"))
                    if header[0] == _title(e) and _params_match(values, e):
                        found.append((values[col], values[header.index("Status")]))
        assert found and all(abs(v * 1e3 - e.median_us) < 1e-6 and s == status_text(e) for v, s in found), (rid, found)


def report_tables_only(tables: list[list[dict[str, str]]]) -> list[list[dict[str, str]]]:
    return [t for t in tables if t and TIME_HEADER in t[0]]


def _title(e: Entry) -> str:
    from deepbench.kernels.catalog import traits_of

    return traits_of(e.kernel.op).title


def _params_match(values: tuple, e: Entry) -> bool:
    params = [("T" if v else "N") if isinstance(v, bool) else v for v in e.kernel.params().values()]
    return list(values[2 : 2 + len(params)]) == params
