"""The host decides by what backends declare, never by their names (issue 54's first "done when").

No module under runner/ names a backend id (a key of kernels/backends' registry) or a native library a
backend declares (`libraries`) in its code: string literals (help text and messages included; docstrings
and comments are documentation, not decisions), identifiers and module names. What the host shows of a
backend, it derives from declarations at run time. Platform names are the host's own (a platform may share
its vendor's name with a backend, as `nvidia` does), and the original tools a backend declares its results
are set beside (`anchors`: nccl-tests) are named by the host's readers of their output. Flags of other
programs (`srun --mpi=pmix`) are not names of a backend.

Nor does the host import a backend's implementation: from kernels/backends it may import the registry, the
contract (contract/) and declarations (<folder>/declaration.py), which load no library; read statically,
then checked by importing every runner module in a fresh interpreter."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from deepbench.kernels.backends import BACKENDS, declared
from deepbench.runner.platforms import PLATFORMS

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "runner"
SKIPPED = ("published", "data")  # result sets and package data, not code
# The readers of a declared anchor's own output, which names what that tool measured (nccl-tests prints
# the NCCL versions it was built with and ran on): the one place a host module may read those names.
ANCHOR_READERS = ("analysis/nccl_tests.py",)
BACKENDS_PACKAGE = "deepbench.kernels.backends"
FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*")
WORD = re.compile(r"[A-Za-z0-9]+")
CAMEL_PART = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# What the host may import from kernels/backends: the registry, the contract, the declarations.
ALLOWED_IMPORTS = re.compile(rf"^{re.escape(BACKENDS_PACKAGE)}(\.contract(\..*)?|\.\w+\.declaration)?$")
# Libraries no runner module may import (the host needs none of them).
LIBRARY_MODULES = ("torch", "onnxruntime", "ai_edge_litert", "nvmath", "cudnn", "mpi4py", "nccl")


@cache
def forbidden() -> tuple[frozenset[str], frozenset[str]]:
    """(backend ids, declared library names), less the platform names the host owns."""
    platform_words = {w for p in PLATFORMS.values() for w in (p.name, *p.aliases)}
    ids = frozenset(BACKENDS) - platform_words
    libraries = frozenset(lib for d in declared().values() for lib in d.libraries) - platform_words
    return ids, libraries


@cache
def anchors() -> tuple[str, ...]:
    """The declared original tools in every spelling code gives them: nccl-tests, nccl_tests, NcclTests."""
    names = {a for d in declared().values() for a in d.anchors}
    forms = set()
    for name in names:
        words = re.split(r"[-_ ]", name)
        forms |= {name, "_".join(words), "".join(w.capitalize() for w in words), " ".join(words)}
    return tuple(sorted(forms, key=len, reverse=True))


def names_in(text: str) -> list[str]:
    """The backend ids and declared libraries `text` names."""
    ids, libraries = forbidden()
    for form in anchors():
        text = text.replace(form, " ")
    text = FLAG.sub(" ", text)
    found = []
    for word in WORD.findall(text):
        if word in libraries:
            found.append(word)
            continue
        found += [part for part in CAMEL_PART.findall(word) if part.lower() in ids and not part.isupper()]
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants (the first statement of a module, class or function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def texts(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal but docstrings, and of every name the code uses."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield line, node.value
        elif isinstance(node, ast.Name):
            yield line, node.id
        elif isinstance(node, ast.Attribute):
            yield line, node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield line, node.name
        elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
            yield line, node.arg
        elif isinstance(node, ast.alias):
            yield line, f"{node.name} {node.asname or ''}"
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield line, node.module


def offences(path: Path) -> list[str]:
    rel = path.relative_to(RUNNER)
    found = [f"its name {rel}: {', '.join(names)}" for names in [names_in(str(rel.with_suffix("")))] if names]
    for line, text in texts(path.read_text()):
        names = names_in(text)
        if names:
            found.append(f"line {line}: {', '.join(sorted(set(names)))} in {text[:80]!r}")
    return found


def runner_files() -> list[Path]:
    return [p for p in sorted(RUNNER.rglob("*.py")) if not set(p.relative_to(RUNNER).parts) & set(SKIPPED)]


def code_files() -> list[Path]:
    """The runner modules held to naming nothing (all but the anchors' readers)."""
    return [p for p in runner_files() if p.relative_to(RUNNER).as_posix() not in ANCHOR_READERS]


def test_the_reading_finds_names_and_spares_what_the_host_owns() -> None:
    assert names_in('"gloo" if cpu else x') == ["gloo"]
    assert names_in("DEVICE_BACKENDS = ('torch',)") == ["torch"]
    assert names_in("NcclLibraries") == ["Nccl"] and names_in("on cuDNN's engines") == ["cuDNN"]
    assert names_in("from torch.distributed import run") == ["torch"]
    assert not names_in("nccl-tests' all_reduce_perf; read_nccl_tests; NcclTestsError")
    assert not names_in("srun --mpi=pmix, mpirun, mpiexec, Open MPI, torchrun, nvidia")


def test_no_runner_module_names_a_backend_or_a_library() -> None:
    found = {str(p.relative_to(REPO)): o for p in code_files() if (o := offences(p))}
    assert not found, (
        "runner modules that name a backend or a library (read it from its declaration instead, "
        f"kernels/backends/contract/declaration.py): {found}"
    )


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in a runner file."""
    package = "deepbench." + ".".join(path.relative_to(REPO).with_suffix("").parts)
    parts = package.split(".")
    if path.name == "__init__.py":
        parts = parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(parts[: len(parts) - node.level]) if node.level else ""
            module = ".".join(x for x in (base, node.module or "") if x)
            yield node.lineno, module
            yield from ((node.lineno, f"{module}.{a.name}") for a in node.names)


def _is_module(name: str) -> bool:
    """Whether `name` is a module of deepbench's (not a name imported from one)."""
    rest = name.split(".")[1:]
    folder = {"kernels": REPO / "kernels", "runner": RUNNER}.get(rest[0]) if rest else None
    if folder is None:
        return False
    target = folder.joinpath(*rest[1:])
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def test_the_host_imports_no_backend_implementation() -> None:
    bad = []
    for path in runner_files():
        for line, module in _imports(path):
            if module.split(".")[0] in LIBRARY_MODULES or (
                module.startswith(BACKENDS_PACKAGE) and _is_module(module) and not ALLOWED_IMPORTS.match(module)
            ):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not bad, f"the host imports a backend's implementation or a library: {bad}"


def test_importing_every_runner_module_loads_no_backend_implementation() -> None:
    """What declarations import comes along (the layers' light modules, the folders' docstring-only
    packages); no backend's class module (backend.py) and no library does."""
    modules = ["deepbench." + ".".join(p.relative_to(REPO).with_suffix("").parts) for p in runner_files()]
    modules = [m.removesuffix(".__init__") for m in modules]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print('\\n'.join(m for m in sys.modules if m.startswith({BACKENDS_PACKAGE!r}) "
        f"or m.split('.')[0] in {LIBRARY_MODULES!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    implementations = {_target_module(e.target) for e in BACKENDS.values()}
    loaded = [m for m in out if m in implementations or m.split(".")[0] in LIBRARY_MODULES]
    assert not loaded, f"importing the runner loads these: {loaded}"
    assert f"{BACKENDS_PACKAGE}.cudnn.declaration" in out  # the reading sees what the runner loads


def _target_module(target: str) -> str:
    return target.partition(":")[0]
