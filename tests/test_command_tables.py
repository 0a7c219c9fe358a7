"""Every command's tables through the reports' fit-or-fold rule (issue 45): `models report`,
`references`, `fastest`, `compare A B` and `compare --reference` on the shipped results, drawn at
80 and 140 columns, read back from the text and compared with the tables' values, and those
values compared with the records (the runs' medians, the references' published figures); the
commands themselves, piped with COLUMNS, print no "…" and no line wider than the terminal."""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import shlex
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.cells import cell_len
from rich.console import Console

from deepbench.kernels.results_file import read_results
from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.fastest import fastest_tables
from deepbench.runner.analysis.like_for_like import notes
from deepbench.runner.analysis.model_report import load_model_run, model_reports
from deepbench.runner.analysis.references import references
from deepbench.runner.analysis.sources import Entry, Source, load_source, short_device, short_labels
from deepbench.runner.commands.references import reference_table
from deepbench.runner.help_format import fill_description
from deepbench.runner.platforms import PLATFORMS
from deepbench.runner.render.compare_render import compare_tables
from deepbench.runner.render.compare_render import summary_table as compare_summary
from deepbench.runner.render.model_tables import top_table, type_table
from deepbench.runner.render.table_fit import fit, footnoted
from deepbench.runner.render.tables import Table, _param, fmt_us
from deepbench.runner.render.verify_render import print_verify, verify_table
from deepbench.runner.submission.checker import check_bundle
from deepbench.runner.submission.show import grouped
from deepbench.runner.submission.verify import ToleranceRule, VerifyReport
from deepbench.runner.submission.verify import compare as verify_compare

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


# ----- a newcomer's terminal: 80 columns (issue 58) -----------------------------------------------------
NARROW = 80
ARM_ONNX = PUBLISHED / "arm-emulated" / "onnxruntime"  # 80 results: unsupported ones, the longest kernel ids
SHORT_LABEL = 12  # a label this short leaves a kernel's comparison one line at 80 columns


def _fits(text: str, width: int = NARROW) -> None:
    wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not wide, f"{len(wide)} lines wider than {width} columns, the first: {wide[0]!r}"


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.slow
def test_compare_a_run_with_a_reference_at_80_columns(smoke_run: Path) -> None:
    """`compare RUN --reference V100`: the run is labelled by its device (a CPU's family when its name has no
    model), so each kernel is one line and the summary too; every value read back; what the command prints
    (standard output and error) fits 80 columns, its warnings whole once their lines are joined."""
    run = load_source(str(smoke_run))
    sources = short_labels([load_source("ref:V100", run.set), run])
    device = run.specs.get("device.name", "")
    assert sources[1].label == (short_device(device) or run.label)
    cmp = compare(sources)
    narrow = len(sources[1].label) <= SHORT_LABEL
    for t in [*compare_tables(cmp), compare_summary(cmp)]:
        check_table(t, NARROW)
        if narrow:
            assert fit(footnoted(t)[0], NARROW).bands == 1, t.title
    p = run_cli("deepbench", "compare", str(smoke_run), "--reference", "V100", env={"COLUMNS": str(NARROW)})
    assert p.returncode == 0, p.stderr
    _fits(p.stdout + p.stderr)
    for line in notes(cmp):  # stderr: each warning, wrapped under its label, reads back whole
        assert _words(line) in _words(p.stderr), line


def _rerun_of(results: list, scale: dict[str, float]) -> list[SimpleNamespace]:
    """What verify reads of a re-run: each result's id, status, reason, flags and statistics, the medians of
    the kernels in `scale` multiplied (a re-run that disagrees there)."""
    out = []
    for r in results:
        stats = r.time_us
        if stats is not None and r.id in scale:
            f = scale[r.id]
            stats = stats.model_copy(
                update={k: getattr(stats, k) * f for k in ("median", "min", "max", "mean", "p25", "p75")}
            )
        out.append(SimpleNamespace(id=r.id, status=r.status, reason=r.reason, flags=r.flags, time_us=stats))
    return out


def test_verify_at_80_columns_one_line_per_kernel_whole_ids() -> None:
    """verify's table on the emulated ARM run (80 kernels, unsupported ones among them, ids up to 37
    characters, remeasured ones marked): at 80 columns each kernel is one line with its whole id, each
    verdict one word with its reason a footnote, and every value read back equals the comparison's."""
    submitted = read_results(ARM_ONNX / "results.jsonl.gz")
    timed = [r for r in submitted if r.time_us]
    scale = {timed[0].id: 2.0, timed[1].id: 0.5, timed[-1].id: 1.04}
    comparisons = verify_compare(submitted, _rerun_of(submitted, scale), ToleranceRule(), remeasured=set(scale))
    assert {c.verdict for c in comparisons} >= {"agree", "disagree"}
    t = verify_table(comparisons)
    rows = check_table(t, NARROW)
    assert fit(footnoted(t)[0], NARROW).bands == 1
    for row, c in zip(rows, comparisons, strict=True):
        assert row["kernel"] == c.id + (" *" if c.remeasured else "")
        assert row["submitted (us)"] == fmt_us(c.submitted_us) and row["re-run (us)"] == fmt_us(c.rerun_us)
        assert row["verdict"].split(" [")[0] == c.verdict
    buf = io.StringIO()
    report = VerifyReport(
        bundle="b",
        rerun="/tmp/verify-run",
        local=True,
        rule=vars(ToleranceRule()).copy(),
        agree=sum(c.verdict == "agree" for c in comparisons),
        disagree=sum(c.verdict == "disagree" for c in comparisons),
        unverifiable=sum(c.verdict == "unverifiable" for c in comparisons),
        environment_differences=["cpu: one thing " * 12],
        comparisons=comparisons,
    )
    print_verify(Console(file=buf, width=NARROW, color_system=None), report)
    _fits(buf.getvalue())
    assert _words("cpu: one thing " * 12) in _words(buf.getvalue())


@pytest.mark.slow
def test_submit_at_80_columns(smoke_run: Path, tmp_path: Path) -> None:
    """submit's warnings and problems, each message once with every kernel it concerns, wrapped under its
    label; the command that reproduces the run broken between its words, the same words when joined."""
    bundle = tmp_path / "bundle"
    p = run_cli(
        "deepbench", "submit", str(smoke_run), "--out", str(bundle), "--submitter", "CI", "--system-name", "VM",
        env={"COLUMNS": str(NARROW)},
    )  # fmt: skip
    assert "Traceback" not in p.stderr, p.stderr
    _fits(p.stdout + p.stderr)
    report = check_bundle(bundle)
    for problem in report.problems + report.warnings:
        assert _words(problem.message) in _words(p.stdout) and problem.where in p.stdout, problem
    assert len(grouped(report.warnings)) == len({w.message for w in report.warnings})
    lines = p.stdout.splitlines()
    at = lines.index("reproduce with:") + 1
    end = next(i for i in range(at, len(lines)) if not lines[i].endswith("\\"))
    printed = "\n".join(lines[at : end + 1]).replace("\\\n", "")
    index = json.loads((bundle / "submission.json").read_text())
    assert shlex.split(printed) == shlex.split(index["reproduce"])


def _script_commands(text: str) -> list[list[str]]:
    """The deepbench-run commands of launch-command's script as the shell reads them (a backslash-newline
    continues a line), the commented-out ones uncommented: each argv, its --launch value split as
    deepbench-run splits it."""
    joined = text.replace("\\\n# ", "").replace("\\\n", "")
    out = []
    for line in joined.splitlines():
        line = line.removeprefix("# ")
        if line.startswith("deepbench-run "):
            argv = shlex.split(line)
            at = argv.index("--launch") + 1
            out.append([*argv[:at], *shlex.split(argv[at])])
    return out


def test_launch_command_at_80_columns_runs_what_it_printed_wide() -> None:
    """launch-command's script at 80 columns: no line wider, comments wrapped as comments, and each command
    the shell reads (bash runs the script with deepbench-run standing for a program that prints its
    arguments) the same as the one-line command printed without a width, word for word. (A short folder:
    a path wider than the terminal has nowhere to break.)"""
    with tempfile.TemporaryDirectory(prefix="db-") as folder:
        _launch_command_both_widths(Path(folder) / "ar")


def _launch_command_both_widths(out: Path) -> None:
    argv = ["launch-command", "--nodes", "2", "--gpus-per-node", "8", "--platform", "nvidia", "--out", str(out)]
    narrow = run_cli("deepbench", *argv, env={"COLUMNS": str(NARROW)})
    assert narrow.returncode == 0, narrow.stderr
    _fits(narrow.stdout)
    assert all(line.startswith(("#", "export ", "deepbench-run ", "    ")) for line in narrow.stdout.splitlines())
    (out / "plan.json").unlink()
    wide = run_cli("deepbench", *argv, env={"COLUMNS": ""})
    assert wide.returncode == 0, wide.stderr
    assert _script_commands(narrow.stdout) == _script_commands(wide.stdout)
    assert len(_script_commands(wide.stdout)) == 5  # MPICH, Open MPI, Open MPI in containers, srun, pyxis
    echo = 'deepbench-run() { python3 -c "import json, sys; print(json.dumps(sys.argv[1:]))" "$@"; }\n'
    ran = subprocess.run(["bash", "-c", echo + narrow.stdout], capture_output=True, text=True, timeout=60)
    got = [["deepbench-run", *json.loads(line)] for line in ran.stdout.splitlines()]
    printed = _script_commands(narrow.stdout)
    # the two commands the script runs (the others are comments): MPICH's, then srun's
    assert [[*g[: g.index("--launch") + 1], *shlex.split(g[g.index("--launch") + 1])] for g in got] == [
        printed[0],
        printed[3],
    ], ran.stderr


def _all_parsers() -> list[argparse.ArgumentParser]:
    from deepbench.runner import cli

    hook = _cli_hook()
    found, stack = [], [hook.built_parser(cli.run_main), hook.built_parser(cli.main)]
    while stack:
        parser = stack.pop()
        found.append(parser)
        stack.extend(child for _, child in hook._subparsers(parser))
    return found


def _cli_hook():
    spec = importlib.util.spec_from_file_location("cli_reference", REPO / "docs" / "hooks" / "cli_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _word_count(text: str) -> Counter:
    """The words of a description, less what fitting it may add or move: comment marks, continuations, quotes."""
    return Counter(w.strip("'\"") for w in text.split() if w not in ("#", "\\"))


def test_every_help_fits_80_columns_and_says_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command's --help (nested ones too) at COLUMNS=80: no line wider; the description's words all
    there (an example's comment moved above it, a long command continued with a backslash); every option's
    help whole; --platform names every name it takes, aliases included (rocm is amd)."""
    monkeypatch.setenv("COLUMNS", str(NARROW))
    parsers = _all_parsers()
    assert len(parsers) > 15
    for parser in parsers:
        text = parser.format_help()
        _fits(text)
        if parser.description:  # the same words (a command's quotes may change: 'ACME Corp' for "ACME Corp")
            said, meant = (
                _word_count(fill_description(parser.description, NARROW - 2)),
                _word_count(parser.description),
            )
            assert said == meant, parser.prog
        for action in parser._actions:
            if action.help and action.help is not argparse.SUPPRESS and "%" not in action.help:
                assert _words(action.help) in _words(text), (parser.prog, action.option_strings)
    run_help = next(p for p in parsers if p.prog == "deepbench-run").format_help()
    for platform in PLATFORMS.values():
        assert all(name in run_help for name in (platform.name, *platform.aliases)), platform.name
