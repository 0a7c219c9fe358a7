"""Every command's tables through the reports' fit-or-fold rule (issue 45): `models report`,
`references`, `fastest`, `compare A B` and `compare --reference` on the shipped results, drawn at
80 and 140 columns, read back from the text and compared with the tables' values, and those
values compared with the records (the runs' medians, the references' published figures); the
commands themselves, piped with COLUMNS, print no "…" and no line wider than the terminal."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.fastest import fastest_tables
from deepbench.runner.analysis.model_report import load_model_run, model_reports
from deepbench.runner.analysis.references import references
from deepbench.runner.analysis.sources import Entry, Source, load_source, short_labels
from deepbench.runner.commands.references import reference_table
from deepbench.runner.render.compare_render import compare_tables
from deepbench.runner.render.model_tables import top_table, type_table
from deepbench.runner.render.tables import Table, _param, fmt_us

from .conftest import REPO, run_cli
from .test_terminal_tables import WIDTHS, check_table

PUBLISHED = REPO / "runner" / "published"
H100, H200 = PUBLISHED / "nvidia-h100" / "train", PUBLISHED / "nvidia-h200" / "train"
RESNET = PUBLISHED / "nvidia-h200" / "model-resnet50-b32"
pytestmark = pytest.mark.skipif(not (H200.exists() and RESNET.exists()), reason="published runs not in this tree")

COMMANDS = {
    "models report": ["models", "report", str(RESNET)],
    "references": ["references"],
    "fastest": ["fastest", f"H100={H100}", f"H200={H200}", "--reference", "V100", "--allow-unlike"],
    "compare A B": ["compare", str(H100), str(H200), "--allow-unlike"],
    "compare --reference": ["compare", str(H100), "--reference", "V100"],
}


def _entries(source: Source, t: Table, row: list[str]) -> list[Entry]:
    """The source's entries with the row's parameters and precision (the records, not the table;
    two applications may share a shape)."""
    fields = row_fields(t)
    want = dict(zip(t.headers, row, strict=True))
    return [
        e
        for e in source.entries
        if e.kernel.op == t.op
        and e.precision == want["prec"].split("/")[0]
        and all(_param(v) == want[f] for f, v in e.kernel.params().items() if f in fields)
    ]


def row_fields(t: Table) -> set[str]:
    from deepbench.kernels.catalog import KERNEL_CLASSES

    return set(KERNEL_CLASSES[t.op].FIELDS)


def _expected_time(e: Entry, on: str) -> str:
    """A row's time as the records give it: the directions' medians summed ('on' names them)."""
    directions = on.split("+") if on else list(e.parts_us)
    if not all(d in e.parts_us for d in directions):  # one part under another name (compared X with Y)
        directions = list(e.parts_us)
    return fmt_us(sum(e.parts_us[d] for d in directions))


@pytest.fixture(scope="module")
def train_sources() -> list[Source]:
    return short_labels([load_source(f"H100={H100}"), load_source(f"H200={H200}"), load_source("ref:V100", "train")])


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_fastest_values_uncut_and_from_the_records(train_sources: list[Source], width: int) -> None:
    tables = fastest_tables(train_sources)
    for t in tables:
        check_table(t, width)
    if width == WIDTHS[0]:
        check_times(tables, train_sources, lambda t, row: row[t.headers.index("on")], every_cell=True)


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("with_reference", [False, True])
def test_compare_values_uncut_and_from_the_records(
    train_sources: list[Source], width: int, with_reference: bool
) -> None:
    sources = [train_sources[2], train_sources[0]] if with_reference else train_sources[:2]
    cmp = compare(sources)
    tables = compare_tables(cmp)
    for t in tables:
        check_table(t, width)
    if width == WIDTHS[0]:
        check_times(tables, sources, _on_from_note, every_cell=False)


def _on_from_note(t: Table, row: list[str]) -> str:
    """The directions a compare row names in its note ('on fwd+bwd_filter; H200 noisy')."""
    first = row[t.headers.index("note")].split("; ")[0]
    return first.removeprefix("on ") if first.startswith("on ") else ""


def check_times(tables: list[Table], sources: list[Source], on_of, every_cell: bool) -> None:
    """Each source's time cell is its record's medians over the row's directions; with
    `every_cell`, a blank cell means the source lacks the kernel."""
    for t in tables:
        for row in t.rows:
            on = on_of(t, row)
            for s in sources:
                cell = row[t.headers.index(f"{s.label} (us)")]
                es = _entries(s, t, row)
                if every_cell:
                    assert (cell == "") == (not es), (s.label, row)
                if cell and any(e.ok for e in es):
                    assert cell in {_expected_time(e, on) for e in es if e.ok}, (s.label, row)


@pytest.mark.parametrize("width", WIDTHS)
def test_references_and_models_report_uncut(width: int) -> None:
    refs = references()
    t = reference_table(
        [
            {
                "name": n,
                "device": r.specs.get("GPU Model") or r.specs.get("CPU Model") or r.specs.get("CPU", ""),
                "kernels": {"fp32": 1},
                "source": r.source,
            }
            for n, r in refs.items()
        ]
    )
    rows = check_table(t, width)
    assert [r["name"] for r in rows] == list(refs)  # every name --reference takes, whole
    run = load_model_run(RESNET)
    for rep in model_reports(run.results, "fwd", run.ceilings, run.device):
        check_table(type_table(rep), width)
        top = check_table(top_table(rep, 10), width)
        by_id = {r.id.rsplit("/", 1)[0]: r for r in run.results if r.precision.name.value == rep.precision}
        for row in top:  # the per-call time is the record's forward median
            r = by_id[row["kernel"]]
            fwd = next(p for p in r.parts if p.direction == "fwd")
            assert row["us per call"] == f"{fwd.measurement.stats.median:.1f}"
        if any(s.pct_peak_bandwidth and s.pct_peak_bandwidth > 100 for s in rep.types):
            assert any("above the measured copy bandwidth" in r[-1] for r in type_table(rep).rows)


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_commands_print_nothing_cut(command: str, width: int) -> None:
    p = run_cli("deepbench", *COMMANDS[command], env={"COLUMNS": str(width)})
    assert p.returncode == 0, p.stderr
    assert "…" not in p.stdout, command
    assert all(cell_len(line) <= width for line in p.stdout.splitlines()), command
