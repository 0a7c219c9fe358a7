"""Energy in the reports (issue 44): the tables' W, J/call and GFLOP/J columns, CSV, the workbook,
the HTML report's throughput-against-power chart, and `compare` and `fastest`'s energy columns,
read from six real records of an H200 run with --energy (tests/fixtures/energy-h200, the first
six lines of tests/benchmarks/results/energy-h200) and from a run without energy (no columns)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from pathlib import Path

import openpyxl
import pytest

from deepbench.kernels.results import KernelResult
from deepbench.kernels.results_file import read_results
from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.fastest import LEAST_ENERGY, LEAST_JOULES, fastest_tables
from deepbench.runner.analysis.sanity import context_of
from deepbench.runner.analysis.sources import load_run, load_source, short_labels
from deepbench.runner.render.compare_render import compare_tables, energy_header
from deepbench.runner.render.report_html import render_html
from deepbench.runner.render.report_render import render_text, tables_of
from deepbench.runner.render.tables import (
    ENERGY_KEYS,
    GB_J_HEADER,
    GFLOP_J_HEADER,
    JOULES_HEADER,
    WATTS_HEADER,
    Table,
    _param,
    fmt_sig,
    tables,
)
from deepbench.runner.render.workbook import WORKBOOK_ENERGY, write_workbook

from .conftest import REPO
from .test_terminal_tables import WIDTHS, check_table

ENERGY_RUN = REPO / "tests" / "fixtures" / "energy-h200"
NO_ENERGY_RUN = REPO / "runner" / "published" / "nvidia-h100" / "train"
SHOWN = (WATTS_HEADER, JOULES_HEADER, GFLOP_J_HEADER)  # a GEMM is rated in TFLOPS: GFLOP/J, not GB/J
WIDE = 400  # wide enough for every column: nothing dropped
SCALE = 2.0  # the scaled copy's energy per call over the fixture's


def _results() -> list[KernelResult]:
    return read_results(ENERGY_RUN / "results.jsonl")


def _expected(r: KernelResult) -> dict[str, str]:
    """The energy cells as the records give them: a GEMM has one direction, so its part's figures."""
    (part,) = r.parts
    e = part.measurement.energy
    assert e is not None
    return {
        WATTS_HEADER: fmt_sig(e.watts),
        JOULES_HEADER: fmt_sig(e.joules_per_call),
        GFLOP_J_HEADER: fmt_sig(e.gflops_per_j),
    }


def _key(t: Table, row: list[str]) -> tuple[str, ...]:
    from deepbench.kernels.catalog import KERNEL_CLASSES

    cells = dict(zip(t.headers, row, strict=True))
    return (*(cells[f] for f in KERNEL_CLASSES[t.op].FIELDS), cells["prec"])


def _record_key(r: KernelResult) -> tuple[str, ...]:
    return (*(_param(v) for v in r.params.values()), r.precision.name.value)


def _check_energy_cells(t: Table) -> None:
    expected = {_record_key(r): _expected(r) for r in _results()}
    assert [h for h in t.headers if h in ENERGY_KEYS] == list(SHOWN)
    assert t.droppable[: len(SHOWN)] == SHOWN  # the first a narrow terminal leaves out
    for row in t.rows:
        want = expected[_key(t, row)]
        for h in SHOWN:
            assert row[t.headers.index(h)] == want[h], (h, row)


def test_report_and_run_tables_carry_the_records_energy() -> None:
    source = load_run(ENERGY_RUN)
    (report,) = tables_of(source)
    (run_end,) = tables(_results(), context_of(source))
    assert len(report.rows) == len(run_end.rows) == len(_results())
    _check_energy_cells(report)
    _check_energy_cells(run_end)


@pytest.mark.parametrize("width", (*WIDTHS, WIDE))
def test_energy_columns_read_back_uncut(width: int) -> None:
    """At 80 and 140 columns the energy columns go first, and what stays reads back whole; wide
    enough, the energy values themselves read back whole."""
    source = load_run(ENERGY_RUN)
    for t in [*tables_of(source), *tables(_results(), context_of(source))]:
        rows = check_table(t, width)
        if width == WIDE:
            for got, want in zip(rows, t.rows, strict=True):
                for h in SHOWN:
                    assert got[h] == want[t.headers.index(h)]


def test_csv_and_workbook_carry_the_same_numbers(tmp_path: Path) -> None:
    source = load_run(ENERGY_RUN)
    (t,) = tables_of(source)
    rows = list(csv.DictReader(io.StringIO(render_text(source, "csv"))))
    assert len(rows) == len(t.rows)
    for got, want in zip(rows, t.rows, strict=True):
        for h in SHOWN:
            assert got[h] == want[t.headers.index(h)]
    path = tmp_path / "energy.xlsx"
    write_workbook(source, path)
    expected = {_record_key(r): r.parts[0].measurement.energy for r in _results()}
    seen = 0
    for ws in openpyxl.load_workbook(path).worksheets:
        if ws["A1"].value != "Precision":  # the precision sheets hold the tables
            continue
        values = list(ws.iter_rows(values_only=True))
        head = next(i for i, v in enumerate(values) if v[0] == "Dense matrix multiplication")
        headers = list(values[head])
        assert WORKBOOK_ENERGY[GB_J_HEADER] not in headers
        for v in values[head + 1 :]:
            cells = dict(zip(headers, v, strict=True))
            e = expected[
                (
                    str(cells["M"]),
                    str(cells["N"]),
                    str(cells["K"]),
                    cells["A Transpose"],
                    cells["B Transpose"],
                    ws["B1"].value,
                )
            ]
            assert e is not None
            assert cells[WORKBOOK_ENERGY[WATTS_HEADER]] == pytest.approx(e.watts, rel=1e-12)
            assert cells[WORKBOOK_ENERGY[JOULES_HEADER]] == pytest.approx(e.joules_per_call, rel=1e-12)
            assert cells[WORKBOOK_ENERGY[GFLOP_J_HEADER]] == pytest.approx(e.gflops_per_j, rel=1e-12)
            seen += 1
    assert seen == len(expected)


def test_html_has_the_perf_per_watt_chart_with_energy() -> None:
    html = render_html(load_run(ENERGY_RUN))
    assert 'id="energy-gemm"' in html
    assert "throughput against power" in html


needs_published = pytest.mark.skipif(not NO_ENERGY_RUN.exists(), reason="published H100 run not in this tree")


@needs_published
def test_a_run_without_energy_has_no_energy_columns_nor_chart(tmp_path: Path) -> None:
    source = load_run(NO_ENERGY_RUN)
    for t in tables_of(source):
        assert not set(t.headers) & set(ENERGY_KEYS), t.headers
    assert not set(ENERGY_KEYS) & set(next(csv.reader(io.StringIO(render_text(source, "csv")))))
    assert 'id="energy-' not in render_html(source)
    path = tmp_path / "plain.xlsx"
    write_workbook(source, path)
    for ws in openpyxl.load_workbook(path).worksheets:
        for row in ws.iter_rows(values_only=True):
            assert WORKBOOK_ENERGY[WATTS_HEADER] not in row


def _scaled_copy(folder: Path) -> Path:
    """The fixture with every energy figure scaled consistently (SCALE times the joules at the same
    times), so the records stay valid and each energy ratio is SCALE."""
    shutil.copytree(ENERGY_RUN, folder)
    out = []
    with gzip.open(ENERGY_RUN / "results.jsonl.gz", "rt") as f:
        for line in f:
            record = json.loads(line)
            for part in record["parts"]:
                e = part["measurement"]["energy"]
                for k in ("joules", "watts", "joules_per_call", "sampled_joules"):
                    if e.get(k) is not None:
                        e[k] *= SCALE
                for k in ("gflops_per_j", "gb_per_j"):
                    if e.get(k) is not None:
                        e[k] /= SCALE
            out.append(json.dumps(record))
    with gzip.open(folder / "results.jsonl.gz", "wt") as f:
        f.write("\n".join(out) + "\n")
    return folder


def test_compare_shows_the_energy_ratio_beside_the_time_ratio(tmp_path: Path) -> None:
    sources = short_labels([load_source(f"A={ENERGY_RUN}"), load_source(f"B={_scaled_copy(tmp_path / 'b')}")])
    (t,) = compare_tables(compare(sources))
    col = t.headers.index(energy_header("B", "A"))
    assert t.headers[col - 1] == "ratio B/A"
    assert [r[col] for r in t.rows] == [f"{SCALE:.3f}"] * len(_results())
    assert [r[col - 1] for r in t.rows] == ["1.000"] * len(_results())  # same times
    assert t.droppable[0] == energy_header("B", "A")
    for width in WIDTHS:
        check_table(t, width)
    (ft,) = fastest_tables(sources)
    assert [r[ft.headers.index(LEAST_ENERGY)] for r in ft.rows] == ["A"] * len(_results())
    joules = {_record_key(r): fmt_sig(r.parts[0].measurement.energy.joules_per_call) for r in _results()}  # type: ignore[union-attr]
    assert sorted(r[ft.headers.index(LEAST_JOULES)] for r in ft.rows) == sorted(joules.values())
    for width in WIDTHS:
        check_table(ft, width)


@needs_published
def test_compare_and_fastest_without_energy_add_no_columns() -> None:
    h200 = REPO / "runner" / "published" / "nvidia-h200" / "train"
    if not h200.exists():
        pytest.skip("published H200 run not in this tree")
    sources = short_labels([load_source(f"H100={NO_ENERGY_RUN}"), load_source(f"H200={h200}")])
    for t in compare_tables(compare(sources)):
        assert not any(h.startswith("J/call") for h in t.headers)
    for t in fastest_tables(sources):
        assert LEAST_ENERGY not in t.headers and LEAST_JOULES not in t.headers
