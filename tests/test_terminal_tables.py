"""Terminal tables that fit or fold and never cut a value (issue 22).

Every table of a smoke run and of the committed H100 `train` run is drawn at 80 and 140 columns,
read back from the text, and compared with the records: each value shown is the whole value
(parameters and precision straight from the kernel records, times formatted from the records'
medians), no line is wider than the terminal, and every column left out is named."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from deepbench.kernels.results_file import read_results
from deepbench.runner.analysis.sanity import context_of
from deepbench.runner.analysis.sources import load_run
from deepbench.runner.analysis.summary import groups, summary_table
from deepbench.runner.render.display import print_tables
from deepbench.runner.render.report_render import tables_of
from deepbench.runner.render.table_fit import fit, footnoted
from deepbench.runner.render.tables import Table, fmt_num, fmt_sig, fmt_us, tables

from .conftest import REPO, run_cli

H100_TRAIN = REPO / "runner" / "published" / "nvidia-h100" / "train"
WIDTHS = (80, 140)
SEP = "│"
RULE = "━"
FOOTNOTE = re.compile(r"^\[(\d+)\] (.*)$")
FOLDED = re.compile(r"each row folded onto (\d+) lines")
LEFT_OUT = re.compile(r"left out[^:]*: (.*) \(see them with")


def draw(t: Table, width: int) -> str:
    buf = io.StringIO()
    print_tables(Console(file=buf, width=width, color_system=None, legacy_windows=False), [t])
    return buf.getvalue()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split(SEP)]


def read_back(text: str, wrapped: bool = True) -> tuple[list[dict[str, str]], list[str], dict[int, str]]:
    """(rows as header -> value, columns named as left out, footnotes) from one drawn table.
    `wrapped`: some column may wrap (a line with a blank first cell continues a row); else every
    line is a row (a blank first cell is a blank value)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if RULE in line)
    rest = lines[rule + 1 :]
    end = next((i for i, line in enumerate(rest) if SEP not in line and "─" not in line), len(rest))
    body, after = rest[:end], rest[end:]
    folded = next((int(m.group(1)) for line in after for m in [FOLDED.search(line)] if m), 1)
    # the title above may wrap onto several lines when the table is narrower than it
    head_lines = [_cells(line) for line in lines[:rule] if SEP in line]
    ncols = len(head_lines[0])
    if folded > 1:  # one header line per band, a row is one line per band then a rule
        headers = [[head_lines[b][c] for c in range(ncols)] for b in range(folded)]
        rows = []
        chunk: list[list[str]] = []
        for line in body:
            if "─" in line and SEP not in line.replace("┼", SEP):
                continue
            if set(line.strip()) <= set("─┼"):
                continue
            chunk.append(_cells(line))
            if len(chunk) == folded:
                rows.append({headers[b][c]: chunk[b][c] for b in range(folded) for c in range(ncols) if headers[b][c]})
                chunk = []
    else:  # headers may wrap at their spaces; a line whose first cell is blank continues a row
        headers_1 = [" ".join(h[c] for h in head_lines if h[c]) for c in range(ncols)]
        rows = []
        for line in body:
            cells = _cells(line)
            if rows and not cells[0] and wrapped:
                for h, c in zip(headers_1, cells, strict=False):
                    if c:
                        rows[-1][h] = f"{rows[-1][h]} {c}".strip()
            else:
                rows.append(dict(zip(headers_1, cells, strict=False)))
    notes: dict[int, str] = {}
    current = None
    left_out: list[str] = []
    for line in after:
        m = FOOTNOTE.match(line)
        if m:
            current = int(m.group(1))
            notes[current] = m.group(2)
        elif current is not None and not line.startswith(("left out", "each row", "~ ")):
            notes[current] += " " + line.strip()
        else:
            current = None
    joined = words(" ".join(after))
    m = LEFT_OUT.search(joined)
    if m:
        left_out = [h.strip() for h in m.group(1).split(", ")]
    return rows, left_out, notes


def words(text: str) -> str:
    return " ".join(text.split())


def check_table(t: Table, width: int) -> list[dict[str, str]]:
    """Draw, read back, and compare every shown value with the table's own (from the records)."""
    text = draw(t, width)
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    shown, _ = footnoted(t)
    layout = fit(shown, width)
    rows, left_out, notes = read_back(text, wrapped=any(t.headers[i] in t.wrap for i in layout.widths))
    assert len(rows) == len(t.rows), text
    assert set(left_out) == set(layout.dropped)
    visible = [t.headers[i] for i in layout.columns]
    assert (
        not set(t.headers)
        - set(visible)
        - set(left_out)
        - {h for i, h in enumerate(t.headers) if not any(r[i] for r in t.rows)}
    ), text
    for got, want, ref in zip(rows, t.rows, shown.rows, strict=False):
        for h in visible:
            i = t.headers.index(h)
            if ref[i] != want[i]:  # a reference to footnotes: "failed [1]", "[1][2]"
                refs = [int(n) for n in re.findall(r"\[(\d+)\]", got[h])]
                assert refs, (h, got[h])
                full = "; ".join(words(notes[n]) for n in refs)
                prefix = got[h].split(" [")[0] if not got[h].startswith("[") else ""
                assert words((f"{prefix}: " if prefix else "") + full) == words(want[i]), (h, got[h], want[i])
            else:
                assert words(got[h]) == words(want[i]), (h, got[h], want[i], text)
    return rows


def compare_with_records(rows: list[dict[str, str]], t: Table, results_by_label: dict) -> None:
    """Parameters, precision and time as the records hold them (not as the table was built)."""
    for row in rows:
        fields = results_by_label[t.op][0].kernel.FIELDS
        params = {h: row[h] for h in row if h in fields}
        hits = [
            r
            for r in results_by_label.get(t.op, [])
            if r.precision.name.value == row.get("prec", "fp32")
            and all(
                (("T" if v else "N") if isinstance(v, bool) else str(v)) == params[f]
                for f, v in r.kernel.params().items()
                if f in params
            )
        ]
        assert hits, row
        if row.get("median (us)"):
            assert any(fmt_us(r.time_us.median) == row["median (us)"] for r in hits if r.time_us), row


def _by_op(results) -> dict:
    out: dict = {}
    for r in results:
        out.setdefault(r.op, []).append(r)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["smoke", "h100-train"])
def test_every_value_of_every_table_appears_uncut(which: str, width: int, smoke_run: Path) -> None:
    folder = smoke_run if which == "smoke" else H100_TRAIN
    source = load_run(folder)
    ctx = context_of(source)
    results = read_results(folder / "results.jsonl")
    by_op = _by_op(results)
    report = tables_of(source)
    run_end = tables(results, ctx)
    summary = summary_table(groups(list(source.entries), ctx))
    assert sum(len(t.rows) for t in report) == len(results) == sum(len(t.rows) for t in run_end)
    for t in report + run_end:
        rows = check_table(t, width)
        compare_with_records(rows, t, by_op)
    check_table(summary, width)


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_report_command_fits_columns_when_piped(width: int) -> None:
    """Piped output honours COLUMNS; nothing is wider, and the parameters of the widest table
    (convolution: 11 of them) are all there, whole."""
    p = run_cli("deepbench", "report", str(H100_TRAIN), env={"COLUMNS": str(width)})
    assert p.returncode == 0, p.stderr
    assert max(cell_len(line) for line in p.stdout.splitlines()) <= width
    conv = p.stdout[p.stdout.index("Convolution") :]
    assert all(h in conv.split("━")[0] for h in ("stride_w", "stride_h", "pad_w", "pad_h"))
    assert "700" in conv and "161" in conv  # w=700 h=161: never "70" / "16"


def test_piped_without_columns_is_as_wide_as_the_tables(tmp_path: Path) -> None:
    env = {"COLUMNS": ""}
    p = run_cli("deepbench", "report", str(H100_TRAIN), env=env)
    assert p.returncode == 0 and "left out" not in p.stdout and "folded" not in p.stdout
    assert "pass 2e-04<5e-03" in p.stdout  # the check column, shown whole


def test_columns_option_selects_and_rejects() -> None:
    p = run_cli("deepbench", "report", str(H100_TRAIN), "--columns", "check,IQR", env={"COLUMNS": "140"})
    assert p.returncode == 0 and "pass 2e-04<5e-03" in p.stdout
    p = run_cli("deepbench", "report", str(H100_TRAIN), "--columns", "nosuch", env={"COLUMNS": "140"})
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "check" in p.stderr
    p = run_cli("deepbench", "report", str(H100_TRAIN), "--columns", "all", env={"COLUMNS": "80"})
    assert p.returncode == 0 and "each row folded" in p.stdout
    assert max(cell_len(line) for line in p.stdout.splitlines()) <= 80


def test_fit_drops_then_compacts_then_folds() -> None:
    t = Table("x", "X", ["param", "value", "extra"], [["123456", "7.5", "zzzzzzzzzz"]], droppable=("extra",))
    assert fit(t, 40).dropped == () and not fit(t, 40).compact
    assert fit(t, 20).dropped == ("extra",)
    assert fit(t, 13).compact and fit(t, 13).dropped == ("extra",)
    wide = Table("y", "Y", [f"p{i}" for i in range(10)], [[str(10**5 + i) for i in range(10)]])
    layout = fit(wide, 40)
    assert layout.bands > 1
    rows, _, _ = read_back(draw(wide, 40))
    assert rows == [dict(zip(wide.headers, wide.rows[0], strict=False))]


def test_long_reasons_become_footnotes() -> None:
    reason = "PyTorch has no int8 convolution with int32 output on this device"
    t = Table("conv", "C", ["k", "status"], [["3", f"unsupported: {reason}"], ["5", f"unsupported: {reason}"]])
    text = draw(t, 80)
    assert text.count("unsupported [1]") == 2 and text.count(reason) == 1
    check_table(t, 80)


def test_a_measured_figure_never_reads_zero() -> None:
    """A figure rounded to its decimals keeps three significant digits where the decimals would read 0 (a
    CPU's 0.000386 TFLOP/s, a slow link's 0.004 GB/s); a zero stays a zero."""
    assert fmt_num(0.000386, 3) == "0.000386" and fmt_num(0.004) == "0.004" and fmt_num(-0.0001) == "-0.0001"
    assert fmt_num(0.0) == "0.00" and fmt_num(1.234) == "1.23" and fmt_num(None) == ""


@pytest.mark.slow
def test_the_run_end_throughput_is_the_reports(smoke_run: Path) -> None:
    """The table a run ends with shows each kernel's throughput as `report` does (three significant digits:
    issue 58's vanilla RNN read 0.000 TFLOPS there and 0.000386 in the report), and never 0 for a kernel
    that ran."""
    source = load_run(smoke_run)
    results = read_results(smoke_run / "results.jsonl")
    report = {t.op: t for t in tables_of(source)}
    for t in tables(results, context_of(source)):
        if "TFLOPS" not in t.headers:
            continue
        mine, theirs = t.headers.index("TFLOPS"), report[t.op].headers.index("TFLOPS")
        by_kernel = {_kernel_key(report[t.op], row): row[theirs] for row in report[t.op].rows}
        for row, r in zip(t.rows, [r for r in results if r.op == t.op], strict=True):
            assert row[mine] == fmt_sig(r.tflops) == by_kernel[_kernel_key(t, row)], (r.id, row[mine])
            if r.tflops:
                assert float(row[mine]) > 0, r.id


def _kernel_key(t: Table, row: list[str]) -> tuple[str, ...]:
    """A row's parameters and precision, by header (the run's table and the report's order columns alike)."""
    from deepbench.kernels.catalog import KERNEL_CLASSES

    return tuple(row[t.headers.index(h)] for h in (*KERNEL_CLASSES[t.op].FIELDS, "prec"))
