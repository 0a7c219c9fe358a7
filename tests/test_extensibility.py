"""Issue 26's "done when": an operation is its kernel class (with its traits), its cost formulas
and a backend module; an output format is one module. Issue 46's: a backend with an option is its
module and its declaration (the option, its CLI group, how it is written back and replayed, the
typed info it records). All are defined here in a temporary package and go through the public
registration hooks only, touching no repository file."""

from __future__ import annotations

import ast
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deepbench.kernels.catalog import operations
from deepbench.kernels.results import Settings

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "runner"
TOY_OP = "toy_scale"

TOY_PACKAGE = {
    "__init__.py": "",
    "costs.py": """
        FLOPS_PER_ELEMENT = 1
        BYTES_PER_ELEMENT = 4

        def scale_flops(elements: int) -> float:
            return float(FLOPS_PER_ELEMENT * elements)

        def scale_bytes(elements: int) -> float:
            return float(2 * BYTES_PER_ELEMENT * elements)
        """,
    "kernel.py": """
        from typing import ClassVar, Literal

        from pydantic import Field

        from deepbench.kernels.catalog import Kernel, register_kernel
        from deepbench.kernels.op_traits import InfoColumn, OpTraits

        from . import costs


        @register_kernel
        class ToyScaleKernel(Kernel):
            FIELDS: ClassVar[tuple[str, ...]] = ("elements",)
            TRAITS: ClassVar[OpTraits | None] = OpTraits(
                "Toy scaling", field_headers={"elements": "Elements"},
                run_columns=(InfoColumn("factor", ("factor",)),))
            op: Literal["toy_scale"] = "toy_scale"
            elements: int = Field(gt=0)

            def flops(self, direction: str = "fwd") -> float:
                return costs.scale_flops(self.elements)

            def min_bytes(self, direction, precision) -> float:
                return costs.scale_bytes(self.elements)
        """,
    "declaration.py": """
        from pydantic import Field

        from deepbench.kernels.backends.contract.declaration import (
            BackendDeclaration, BackendOptions, PartInfo, info_of)

        DEFAULT_FACTOR = 3.0


        class ToyOptions(BackendOptions):
            factor: float = Field(DEFAULT_FACTOR, gt=0, description="what the toy multiplies by")


        class ToyInfo(PartInfo):
            factor: float


        class ToyDeclaration(BackendDeclaration[ToyOptions]):
            part_info = ToyInfo

            def add_arguments(self, group):
                group.add_argument("--toy-factor", type=float, default=DEFAULT_FACTOR, help="the toy's factor")

            def options_from(self, args):
                return ToyOptions(factor=args.toy_factor)

            def to_args(self, options):
                return [] if options.factor == DEFAULT_FACTOR else ["--toy-factor", f"{options.factor:g}"]

            def replay(self, options, results):
                # the factor the results recorded, as cuDNN's declaration pins the engines its results name
                recorded = [info_of(ToyInfo, r.info) for r in results]
                return options.model_copy(update={"factor": recorded[0].factor}) if recorded else options


        TOY = ToyDeclaration("toy", ToyOptions)
        """,
    "backend.py": """
        import numpy as np

        from deepbench.kernels.backends import register_backend
        from deepbench.kernels.backends.contract.base import Backend, Prepared, TimedPart
        from deepbench.kernels.results import Check
        from deepbench.kernels.timing import cpu as cpu_timer

        from .declaration import TOY

        MIN_SAMPLE_S = 1e-4


        class ToyBackend(Backend):
            name = "toy"

            def prepare(self, kernel, precision):
                factor = TOY.options_of(self.settings).factor
                x = np.arange(kernel.elements, dtype=np.float32)
                y = np.empty_like(x)

                def run():
                    np.multiply(x, factor, out=y)

                def check():
                    ok = bool(np.array_equal(y, x * np.float32(factor)))
                    return Check(passed=ok, method="exact", error=0.0 if ok else 1.0, tolerance=0.0)

                part = TimedPart("fwd", run, check, kernel.flops(), kernel.min_bytes("fwd", precision))
                return Prepared([part], info={"factor": factor})

            def measure(self, fn, rule, part):
                return cpu_timer.measure(fn, rule, MIN_SAMPLE_S)


        register_backend("toy", f"{__name__}:ToyBackend", "toyplugin.declaration:TOY")
        """,
    "format_shout.py": """
        from deepbench.runner.render.render_formats import REPORT, ReportFormat, emit, register_format
        from deepbench.runner.render.report_render import tables_of


        def shout(source, out, columns=None):
            lines = [t.title.upper() + ": " + str(len(t.rows)) + " ROWS" for t in tables_of(source)]
            return emit("\\n".join(lines) + "\\n", out)


        register_format(ReportFormat("shout", {REPORT: shout}))
        """,
}


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The toy package on sys.path; its operation, backend and format unregistered afterwards."""
    from deepbench.kernels import backends
    from deepbench.kernels.catalog import unregister_kernel
    from deepbench.runner.render import render_formats

    pkg = tmp_path / "toyplugin"
    pkg.mkdir()
    for name, text in TOY_PACKAGE.items():
        (pkg / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(backends, "BACKENDS", dict(backends.BACKENDS))
    before = _repository_state()
    yield tmp_path
    assert _repository_state() == before, "the toy plug-in touched a repository file"
    unregister_kernel(TOY_OP)
    render_formats.unregister_format("shout")
    for name in [m for m in sys.modules if m.startswith("toyplugin")]:
        del sys.modules[name]


def _repository_state() -> str:
    """What git sees changed in the repository (nothing may change while the plug-in is used)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return ""
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


def _toy_run(out: Path, elements: tuple[int, ...], settings: Settings | None = None) -> Path:
    """Run the toy kernels through the harness's item runner and write a results folder."""
    from toyplugin.kernel import ToyScaleKernel

    from deepbench.kernels.backends import load_backend
    from deepbench.kernels.harness.execute import run_item
    from deepbench.kernels.results import PlanItem
    from deepbench.kernels.results_file import append_result

    settings = settings or Settings(mode="fast", time_cap_s=0.05, min_samples=2)
    backend = load_backend("toy", settings)
    out.mkdir()
    for i, n in enumerate(elements):
        item = PlanItem(kernel=ToyScaleKernel(set="train", index=i, elements=n), precision="fp32")
        append_result(out / "results.jsonl", run_item(backend, item, settings))
    return out


def test_a_toy_operation_runs_reports_in_every_format_and_compares(toy: Path, capsys) -> None:
    import toyplugin.backend
    import toyplugin.kernel  # noqa: F401 - registers the operation

    from deepbench.kernels.results import Status
    from deepbench.kernels.results_file import read_results
    from deepbench.runner.cli import main
    from deepbench.runner.render import render_formats
    from deepbench.runner.render.tables import tables

    assert TOY_OP in operations()
    a = _toy_run(toy / "a", (1024, 4096))
    b = _toy_run(toy / "b", (1024, 4096))
    rs = read_results(a / "results.jsonl")
    assert [r.status for r in rs] == [Status.OK, Status.OK] and rs[0].check.passed
    assert rs[0].kernel.flops() == 1024.0 and rs[0].tflops and rs[0].tflops > 0
    run_table = next(t for t in tables(rs) if t.op == TOY_OP)
    assert run_table.title == "Toy scaling" and "factor" in run_table.headers and run_table.rows[0][-3] == "3.00"

    for fmt in render_formats.choices(render_formats.REPORT):
        target = toy / f"report.{fmt}"
        assert main(["report", str(a), "--format", fmt, "--out", str(target)]) == 0, fmt
        assert target.stat().st_size > 0, fmt
        if fmt in ("md", "csv", "html", "table"):
            assert "Toy scaling" in target.read_text() or "elements" in target.read_text(), fmt
    from openpyxl import load_workbook

    sheet = load_workbook(toy / "report.xlsx")["Results fp32"]
    assert any(row[0] == "Toy scaling" and "Elements" in row for row in sheet.iter_rows(values_only=True))

    for fmt in render_formats.choices(render_formats.COMPARE):
        target = toy / f"compare.{fmt}"
        assert main(["compare", f"A={a}", f"B={b}", "--format", fmt, "--out", str(target)]) == 0, fmt
        assert "elements" in target.read_text() or "Toy scaling" in target.read_text(), fmt
    for fmt in render_formats.choices(render_formats.FASTEST):
        target = toy / f"fastest.{fmt}"
        assert main(["fastest", f"A={a}", f"B={b}", "--format", fmt, "--out", str(target)]) == 0, fmt
        assert "toy_scale" in target.read_text() or "Toy scaling" in target.read_text(), fmt


def test_a_toy_backend_with_an_option_goes_from_the_command_line_to_the_plan_the_reproduce_command_and_verify(
    toy: Path, capsys
) -> None:
    import toyplugin.backend
    import toyplugin.kernel  # noqa: F401 - registers the operation

    from deepbench.kernels.harness.record import build_record, write_record
    from deepbench.kernels.results import utcnow
    from deepbench.kernels.results_file import read_results
    from deepbench.runner.backend_options import replayed
    from deepbench.runner.cli import main, run_main
    from deepbench.runner.launch.running.new_plan import plan_for
    from deepbench.runner.launch.running.request import parse_request
    from deepbench.runner.render.tables import tables
    from deepbench.runner.submission.bundle import reproduce_command

    with pytest.raises(SystemExit):
        run_main(["--help"])
    shown = capsys.readouterr().out
    assert "toy backend:" in shown and "--toy-factor" in shown

    asked = ["--local", "--backend", "toy", "--suite", "smoke", "--limit", "1", "--toy-factor", "5", "--fast"]
    plan, _ = plan_for(parse_request(asked))
    assert plan.settings.backend_options["toy"] == {"factor": 5.0}
    assert "cudnn" not in plan.settings.backend_options  # a backend the run does not use keeps its defaults out
    command = reproduce_command(plan, local=True, image_digest=None)
    assert "--toy-factor 5" in command
    again, _ = plan_for(parse_request(shlex.split(command)[1:]))
    assert again.settings.backend_options == plan.settings.backend_options

    # The run records the factor in its typed info; verify replays what the results recorded.
    settings = plan.settings.model_copy(update={"time_cap_s": 0.05, "min_samples": 2})
    run = _toy_run(toy / "five", (1024,), settings)
    results = read_results(run / "results.jsonl")
    assert results[0].info["factor"] == 5.0
    bare = settings.model_copy(update={"backend_options": {}})
    assert replayed(bare, results).backend_options["toy"] == {"factor": 5.0}
    write_record(run, build_record(plan.model_copy(update={"settings": settings}), run, "complete", utcnow(), {}))
    assert main(["report", str(run), "--format", "md", "--out", str(toy / "five.md")]) == 0
    assert "| settings.backend_options.toy.factor | 5.0 |" in (toy / "five.md").read_text()
    assert next(t for t in tables(results) if t.op == TOY_OP).rows[0][-3] == "5.00"

    # Options the declaration rejects are a one-line usage error on the command line ...
    from deepbench.runner.errors import UserError

    with pytest.raises(UserError, match="toy backend options: factor"):
        parse_request([*asked[:-3], "--toy-factor", "-1"])
    # ... and said when the backend loads, before any kernel runs (a plan edited by hand).
    from deepbench.kernels.backends import load_backend
    from deepbench.kernels.backends.contract.declaration import BackendOptionsError

    with pytest.raises(BackendOptionsError, match=r"backend_options\.toy\.factor"):
        load_backend("toy", settings.model_copy(update={"backend_options": {"toy": {"factor": -1}}}))


def test_a_new_format_is_one_module(toy: Path, smoke_run: Path, capsys) -> None:
    from deepbench.runner.cli import main

    with pytest.raises(SystemExit):  # not a choice before its module is loaded
        main(["report", str(smoke_run), "--format", "shout"])
    import toyplugin.format_shout  # noqa: F401 - registers the format

    capsys.readouterr()
    assert main(["report", str(smoke_run), "--format", "shout"]) == 0
    assert "DENSE MATRIX MULTIPLICATION: " in capsys.readouterr().out


# ----- no host module branches on an operation's name ---------------------------------------
# Names that stand for one operation (a comparison with them is a branch on its name).
OP_CONSTANTS = {"MODEL_OP", "WHOLE_MODEL_OP", "LAYER_OPS"}


def _op_literals(node: ast.AST, names: set[str]) -> list[str]:
    """The operation names among a comparison operand's string constants (tuples, lists, sets too)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]


def op_name_branches(source: str, names: set[str]) -> list[str]:
    """Comparisons against an operation's name and uses of the constants that name one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += [f"line {node.lineno}: compares with {name!r}" for name in _op_literals(operand, names)]
        elif isinstance(node, ast.Name) and node.id in OP_CONSTANTS:
            found.append(f"line {node.lineno}: uses {node.id}")
        elif isinstance(node, ast.alias) and node.name in OP_CONSTANTS:
            found.append(f"imports {node.name}")
    return found


def test_the_check_finds_a_branch_on_an_op_name() -> None:
    names = set(operations())
    assert op_name_branches('if k.op == "all_reduce":\n    pass\n', names)
    assert op_name_branches('x = "GB/s" if op in ("gemm", "conv") else 1\n', names)
    assert op_name_branches("from a import WHOLE_MODEL_OP\n", names)
    assert not op_name_branches('PRECISIONS = {"gemm": ("int8",)}\nif k.op == op:\n    pass\n', names)


def test_no_runner_module_branches_on_an_operation_name() -> None:
    names = set(operations())
    offenders = {}
    for path in sorted(RUNNER.rglob("*.py")):
        found = op_name_branches(path.read_text(), names)
        if found:
            offenders[str(path.relative_to(RUNNER))] = found
    assert not offenders, f"runner modules that branch on an operation's name (use its traits): {offenders}"
