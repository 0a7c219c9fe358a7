"""The shape of deepbench's imports, read statically (no module is imported, so backends whose
libraries are missing here are checked too).

- No import circles among deepbench's modules: a circle makes the order modules load in matter,
  and hides which of two modules is the lower layer. Every import counts, also one inside a
  function or under TYPE_CHECKING: moving an import into a function hides a circle, it does
  not remove it.
- Backends never import the harness: the harness drives backends, so the arrow points one way;
  what both need (which rank this is, fault injection) lives below both.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "deepbench"
# The two top-level folders and the package names they are installed as (pyproject.toml).
TOP_LEVEL = {"kernels": f"{PACKAGE}.kernels", "runner": f"{PACKAGE}.runner"}
BACKENDS = f"{PACKAGE}.kernels.backends"
HARNESS = f"{PACKAGE}.kernels.harness"


def module_files() -> dict[str, Path]:
    """Every deepbench module by its dotted name (a package by its __init__.py)."""
    found: dict[str, Path] = {}
    for folder, package in TOP_LEVEL.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def _resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative imports resolved against `name`)."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level, in a function or a class, but not
    under `if TYPE_CHECKING:` (an annotation's import never runs, so it cannot make a circle)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The deepbench modules that `name` imports, anywhere in its source. `from P import x` counts
    as importing P.x where P.x is a module, else P."""
    out: set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in modules)
            continue
        target = _resolve(name, path, node)
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if sub in modules:
                out.add(sub)
            elif target in modules:
                out.add(target)
    out.discard(name)
    return out


@cache
def import_graph() -> dict[str, set[str]]:
    files = module_files()
    names = set(files)
    return {name: imports_of(name, path, names) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_finds_deepbench_modules() -> None:
    """The test's own reading: it sees the modules and an import known to exist."""
    graph = import_graph()
    assert f"{HARNESS}.__main__" in graph
    assert f"{PACKAGE}.kernels.catalog" in graph[f"{PACKAGE}.kernels.suites"]


def test_the_cycle_finder_reports_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_resolve() -> None:
    node = ast.parse("from ..harness import faults").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("deepbench.kernels.backends.base", Path("base.py"), node) == "deepbench.kernels.harness"
    assert _resolve("deepbench.kernels.backends", Path("__init__.py"), node) == "deepbench.kernels.harness"
    node = ast.parse("from . import base").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("deepbench.kernels.backends", Path("__init__.py"), node) == "deepbench.kernels.backends"


def test_no_import_circles() -> None:
    found = cycles(import_graph())
    assert not found, "import circles among deepbench modules:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("module", sorted(m for m in module_files() if m.startswith(BACKENDS)))
def test_backends_never_import_the_harness(module: str) -> None:
    graph = import_graph()
    bad = sorted(m for m in graph[module] if m == HARNESS or m.startswith(HARNESS + "."))
    assert not bad, f"{module} imports the harness ({', '.join(bad)}): move what it needs below both"


def test_an_import_inside_a_function_counts_and_a_type_only_one_does_not(tmp_path: Path) -> None:
    """Moving an import into a function hides a circle without breaking it: it still counts."""
    module = tmp_path / "a.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\ndef f():\n    from . import b\n"
    )
    names = {"pkg.a", "pkg.b", "pkg.c"}
    assert imports_of("pkg.a", module, names) == {"pkg.b"}


# The runner's rooms (docs/architecture.md): what the results mean and how they are shown
# never depend on how a run is launched or on the command line, so reports work wherever results are copied.
LOWER_ROOMS = (f"{PACKAGE}.runner.analysis", f"{PACKAGE}.runner.render")
UPPER_ROOMS = (f"{PACKAGE}.runner.launch", f"{PACKAGE}.runner.commands", f"{PACKAGE}.runner.cli")


def test_analysis_and_render_never_import_launch_or_commands() -> None:
    graph = import_graph()
    wrong = {
        m: sorted(i for i in imports if i.startswith(UPPER_ROOMS))
        for m, imports in graph.items()
        if m.startswith(LOWER_ROOMS)
    }
    assert not {m: i for m, i in wrong.items() if i}
