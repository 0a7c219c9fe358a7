"""The shape issue 54 set for the code a newcomer finds their way in: every backend is one folder of one
shape, and no function runs over a screen.

- A registered backend of the package is a folder under kernels/backends/ holding a docstring-only
  `__init__.py` (its library is imported by backend.py alone, so the folder's declaration loads without it),
  `backend.py` (the class the registry names) and `declaration.py` (what the registry's second half names).
- No function or method in kernels/ or runner/ is longer than MAX_FUNCTION_LINES lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from deepbench.kernels.backends import BACKENDS

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "deepbench.kernels.backends"
MAX_FUNCTION_LINES = 80
SKIPPED = ("published",)


def _docstring_only(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_a_backend_is_a_folder_of_one_shape(name: str) -> None:
    entry = BACKENDS[name]
    module, _, _cls = entry.target.partition(":")
    assert module.startswith(PACKAGE + ".") and module.endswith(".backend"), f"{name}: {entry.target}"
    folder = REPO / "kernels" / "backends" / module.split(".")[3]
    assert _docstring_only(folder / "__init__.py"), f"{folder}/__init__.py holds more than a docstring"
    assert (folder / "backend.py").is_file() and (folder / "declaration.py").is_file(), folder
    assert entry.declaration.partition(":")[0] == f"{PACKAGE}.{folder.name}.declaration", f"{name}: {entry.declaration}"


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{node.name} (line {node.lineno}: {lines} lines)")
    return found


def test_the_reading_counts_a_function_from_its_def_to_its_last_line() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    assert not long_functions(f"def f():\n{body}\n")  # 80 lines with its def
    assert long_functions(f"def f():\n{body}\n    return x0\n") == ["f (line 1: 81 lines)"]


def test_no_function_is_longer_than_a_screen() -> None:
    found = {}
    for top in ("kernels", "runner"):
        for path in sorted((REPO / top).rglob("*.py")):
            if set(path.relative_to(REPO).parts) & set(SKIPPED):
                continue
            long = long_functions(path.read_text())
            if long:
                found[str(path.relative_to(REPO))] = long
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split them by what their parts do): {found}"
