"""Issue 54's second "done when": a backend is its folder and one registry line. The backend in
tests/fixtures/backends/numpyfix/ (NumPy's BLAS: GEMM and forward convolution, float32) is registered by
adding one line to a copy of the registry (kernels/backends/__init__.py) and nothing else; then the smoke
suite runs on it end to end (`deepbench-run`, in a harness process of its own), and its run is reported,
submitted, checked and compared beside the torch backend's, as any run is."""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest

from deepbench.kernels.results import RESULTS_FILE, Status
from deepbench.kernels.results_file import read_results

from .conftest import REPO, run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "backends"
REGISTRY = REPO / "kernels" / "backends" / "__init__.py"
REGISTRY_LINE = '    "numpyfix": Entry("numpyfix.backend:NumpyBackend", "numpyfix.declaration:NUMPYFIX"),\n'
MODIFIED_TREE = "run from a modified source tree"
RUNS = {"gemm", "conv"}  # what the fixture runs; every other operation is unsupported with its reason


def package_with_line(root: Path, line: str) -> Path:
    """A copy of the deepbench package (links to the repository's files) whose registry has `line` added at
    the end of BACKENDS: the folder to put on PYTHONPATH."""
    package = root / "deepbench"
    package.mkdir(parents=True)
    (package / "runner").symlink_to(REPO / "runner")
    kernels = package / "kernels"
    kernels.mkdir()
    for entry in (REPO / "kernels").iterdir():
        if entry.name not in ("backends", "__pycache__"):
            (kernels / entry.name).symlink_to(entry)
    backends = kernels / "backends"
    backends.mkdir()
    for entry in REGISTRY.parent.iterdir():
        if entry.name not in ("__init__.py", "__pycache__"):
            (backends / entry.name).symlink_to(entry)
    lines = REGISTRY.read_text().splitlines(keepends=True)
    start = next(i for i, text in enumerate(lines) if text.startswith("BACKENDS"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("}"))
    (backends / "__init__.py").write_text("".join([*lines[:end], line, *lines[end:]]))
    return root


def added_lines(before: Path, after: Path) -> list[str]:
    diff = difflib.ndiff(before.read_text().splitlines(keepends=True), after.read_text().splitlines(keepends=True))
    changed = [d for d in diff if d[:2] in ("+ ", "- ")]
    assert all(d.startswith("+ ") for d in changed), f"lines were removed or changed: {changed}"
    return [d[2:] for d in changed]


@pytest.mark.slow
def test_a_backend_from_its_folder_and_one_registry_line_runs_reports_checks_and_compares(
    tmp_path: Path, smoke_run: Path
) -> None:
    root = package_with_line(tmp_path / "package", REGISTRY_LINE)
    assert added_lines(REGISTRY, root / "deepbench" / "kernels" / "backends" / "__init__.py") == [REGISTRY_LINE]
    env = {"PYTHONPATH": os.pathsep.join([str(root), str(FIXTURES)])}
    run = tmp_path / "run"
    proc = run_cli(
        "deepbench-run", "--local", "--backend", "numpyfix", "--suite", "smoke", "--fast", "--out", str(run), env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = read_results(run / RESULTS_FILE)
    assert {r.backend for r in results} == {"numpyfix"}
    for r in results:
        if r.op in RUNS:
            assert r.status is Status.OK and r.check is not None and r.check.passed, (r.id, r.reason)
            assert [p.direction for p in r.parts] == ["fwd"]  # forward only, as its declaration says
        else:
            assert r.status is Status.UNSUPPORTED and f"does not run {r.op}" in r.reason, (r.id, r.reason)

    report = run_cli("deepbench", "report", str(run), "--format", "md", env=env)
    assert report.returncode == 0 and "gemm/train/020" not in report.stderr, report.stderr
    assert "| 1760 |" in report.stdout and "Convolution" in report.stdout, report.stdout[:2000]

    bundle = tmp_path / "bundle"
    submit = run_cli(
        "deepbench", "submit", str(run), "--out", str(bundle), "--submitter", "CI", "--system-name", "VM", env=env
    )
    problems = [line for line in submit.stdout.splitlines() if line.startswith("PROBLEM")]
    # A developer's uncommitted work makes the tree "modified" (a fresh clone is not): that alone may be said.
    assert all(MODIFIED_TREE in line for line in problems), submit.stdout + submit.stderr
    check = run_cli("deepbench", "check", str(bundle), "--allow-modified", env=env)
    assert check.returncode == 0, check.stdout + check.stderr

    compared = run_cli(
        "deepbench", "compare", f"TORCH={smoke_run}", f"NUMPY={run}", "--format", "md", "--allow-unlike", env=env
    )
    assert compared.returncode == 0, compared.stderr
    assert "NUMPY vs TORCH" in compared.stdout, compared.stdout[:2000]


def test_the_copy_differs_from_the_registry_by_the_line_alone(tmp_path: Path) -> None:
    """The reading the test above relies on: the copy is the registry plus one line, nothing else."""
    root = package_with_line(tmp_path, REGISTRY_LINE)
    copy = root / "deepbench" / "kernels" / "backends" / "__init__.py"
    assert added_lines(REGISTRY, copy) == [REGISTRY_LINE]
    shutil.copy(REGISTRY, tmp_path / "other.py")
    (tmp_path / "other.py").write_text(REGISTRY.read_text().replace("BACKENDS", "REGISTERED", 1))
    with pytest.raises(AssertionError, match="removed or changed"):
        added_lines(REGISTRY, tmp_path / "other.py")
