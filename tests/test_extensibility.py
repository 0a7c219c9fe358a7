"""Issue 26's "done when": an operation is its kernel class (with its traits), its cost formulas
and a backend module; an output format is one module. Both are defined here in a temporary
package and go through the public registration hooks only, touching no repository file."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from deepbench.kernels.catalog import operations

RUNNER = Path(__file__).resolve().parents[1] / "runner"
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
    "backend.py": """
        import numpy as np

        from deepbench.kernels.backends import register_backend
        from deepbench.kernels.backends.base import Backend, Prepared, TimedPart
        from deepbench.kernels.results import Check
        from deepbench.kernels.timing import cpu as cpu_timer

        FACTOR = 3.0
        MIN_SAMPLE_S = 1e-4


        class ToyBackend(Backend):
            name = "toy"

            def prepare(self, kernel, precision):
                x = np.arange(kernel.elements, dtype=np.float32)
                y = np.empty_like(x)

                def run():
                    np.multiply(x, FACTOR, out=y)

                def check():
                    ok = bool(np.array_equal(y, x * FACTOR))
                    return Check(passed=ok, method="exact", error=0.0 if ok else 1.0, tolerance=0.0)

                part = TimedPart("fwd", run, check, kernel.flops(), kernel.min_bytes("fwd", precision))
                return Prepared([part], info={"factor": FACTOR})

            def measure(self, fn, rule, part):
                return cpu_timer.measure(fn, rule, MIN_SAMPLE_S)


        register_backend("toy", f"{__name__}:ToyBackend")
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
    yield tmp_path
    unregister_kernel(TOY_OP)
    render_formats.unregister_format("shout")
    for name in [m for m in sys.modules if m.startswith("toyplugin")]:
        del sys.modules[name]


def _toy_run(out: Path, elements: tuple[int, ...]) -> Path:
    """Run the toy kernels through the harness's item runner and write a results folder."""
    from toyplugin.kernel import ToyScaleKernel

    from deepbench.kernels.backends import load_backend
    from deepbench.kernels.harness.execute import run_item
    from deepbench.kernels.results import PlanItem, Settings
    from deepbench.kernels.results_file import append_result

    settings = Settings(mode="fast", time_cap_s=0.05, min_samples=2)
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
