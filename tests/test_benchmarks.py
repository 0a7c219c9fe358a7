"""The benchmarks beside the tool (tests/benchmarks/): each is listed in its README with the page that cites it,
each Python script still imports and parses its arguments, each shell script parses, and every path under
tests/benchmarks/ that the documentation cites is in the repository (raw evidence removed from the tree is
cited as `9450c78:PATH`, a revision git can show)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "tests" / "benchmarks"
README = BENCHMARKS / "README.md"
HELP_TIMEOUT_S = 120
# A path under tests/benchmarks/ as the docs write it (in backticks or prose); glob characters allowed.
CITED_PATH = re.compile(r"(?<![\w:/.-])tests/benchmarks/[\w./*-]*[\w/*]")
# The commit the removed probes and raw evidence were last present in; citations after it are history.
HISTORY_PREFIX = "9450c78:"
# A placeholder segment in a command the docs show (tests/benchmarks/results/FOLDER), not a path.
PLACEHOLDER = re.compile(r"/[A-Z_]{3,}(?:/|$)")
DOCUMENTS = (ROOT / "README.md", README, BENCHMARKS / "results" / "README.md")


def listed_files(readme_text: str) -> set[str]:
    """The names in the first column of the README's table (`name`, or `name/` for a folder)."""
    return {m.rstrip("/") for m in re.findall(r"^\| `([^`]+)` \|", readme_text, re.M)}


def folder_entries() -> set[str]:
    return {p.name for p in BENCHMARKS.iterdir() if p.name not in {"README.md", "__pycache__"}}


def missing_citations(text: str, root: Path) -> list[str]:
    """Paths under tests/benchmarks/ that `text` cites and `root` does not hold (glob patterns match at least
    one path, placeholders such as FOLDER are skipped); a citation preceded by the history commit
    (9450c78:tests/...) is not looked for."""
    missing = []
    for match in CITED_PATH.finditer(text):
        path = match.group(0).rstrip(".")
        if PLACEHOLDER.search(path):
            continue
        found = any(root.glob(path)) if "*" in path else (root / path).exists()
        if not found:
            missing.append(path)
    return missing


def test_every_benchmark_is_listed_in_the_readme_and_every_row_is_a_file() -> None:
    listed, present = listed_files(README.read_text()), folder_entries()
    assert present - listed == set(), f"tests/benchmarks/ holds files its README does not list: {present - listed}"
    assert listed - present == set(), f"the README lists files that are not in tests/benchmarks/: {listed - present}"


def test_every_readme_row_names_the_doc_that_cites_it() -> None:
    for row in re.findall(r"^\| `([^`]+)` \|.*\| ([^|]*) \|$", README.read_text(), re.M):
        name, cited_by = row
        pages = re.findall(r"docs/[\w/.-]+\.md|docs/[\w/-]+/", cited_by)
        assert pages, f"{name}: no documentation page named in its 'cited by' column"
        for page in pages:
            assert (ROOT / page).exists(), f"{name}: cited by {page}, which does not exist"


PYTHON_SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))
SHELL_SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.sh"))


@pytest.mark.parametrize("name", PYTHON_SCRIPTS)
def test_python_benchmark_imports_and_parses_its_arguments(name: str) -> None:
    """A script with an argparse command line answers --help (its imports resolve, its parser builds); any
    other (loop_library.py, which scripts import; cublas_layout.py, which takes no arguments and needs a GPU
    to run) is imported, which runs nothing but its definitions."""
    path = BENCHMARKS / name
    if "argparse" in path.read_text():
        p = subprocess.run(
            [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=HELP_TIMEOUT_S, cwd=ROOT
        )
        assert p.returncode == 0, p.stderr[-2000:]
        assert "usage:" in p.stdout
        return
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert module.__doc__, f"{name} says nothing of what it is for"


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_shell_benchmark_parses(name: str) -> None:
    p = subprocess.run(["bash", "-n", str(BENCHMARKS / name)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_every_cited_benchmark_path_is_in_the_repository() -> None:
    documents = [*DOCUMENTS, *sorted((ROOT / "docs").rglob("*.md"))]
    for path in documents:
        missing = missing_citations(path.read_text(), ROOT)
        assert not missing, (
            f"{path.relative_to(ROOT)} cites {missing}, not in the repository; cite a removed file "
            f"as {HISTORY_PREFIX}PATH"
        )


def test_a_missing_citation_is_reported_and_history_is_not(tmp_path: Path) -> None:
    (tmp_path / "tests" / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "tests" / "benchmarks" / "results" / "a-h100.log").write_text("")
    text = (
        "see `tests/benchmarks/results/a-h100.log`, `tests/benchmarks/results/*-h100*`, "
        "`tests/benchmarks/gone.py`, `tests/benchmarks/results/FOLDER` and "
        "`9450c78:tests/benchmarks/results/old.json`."
    )
    assert missing_citations(text, tmp_path) == ["tests/benchmarks/gone.py"]
