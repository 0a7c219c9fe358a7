"""No backend imports another, read statically as tests/test_import_graph.py reads every import
(no module is imported, so backends whose libraries are missing here are checked too).

- A backend is the folder directly under kernels/backends/ that holds a class `BACKENDS` registers
  (kernels/backends/__init__.py): `pytorch/`, `cublas/`, ..., `nccl/` (which serves nccl and rccl).
- A backend imports no other backend: what two backends share lives below both, in the reference
  layer (kernels/reference/: float64 references, samplers, checks, operand builders) or in a shared
  layer of kernels/backends/ (contract/, gpu/, cpu/, shared/, collectives/). A backend that needs
  another's results loads it by name through the registry, as a run does.
- A shared layer imports no backend either, and the reference layer imports nothing from
  kernels/backends/: a reference that lived in, or leaned on, a backend could share the blind spot
  of the library it checks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple, Protocol

import pytest

from deepbench.kernels.backends import BACKENDS as REGISTRY
from tests.test_import_graph import BACKENDS, PACKAGE, import_graph, module_files

REFERENCE = f"{PACKAGE}.kernels.reference"
# The backends that run on a CPU board without PyTorch (kernels/timing/meters.py says so too).
TORCHLESS_BACKENDS = (f"{BACKENDS}.onnxruntime", f"{BACKENDS}.tflite")
TORCH = "torch"


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


class _HasTarget(Protocol):
    @property
    def target(self) -> str: ...


def _target_module(entry: str | _HasTarget) -> str:
    """The module a registry entry names: a "module:class" string, or an entry carrying one as `target`."""
    target = entry if isinstance(entry, str) else entry.target
    return target.partition(":")[0]


def backend_units(registry: Mapping[str, str | _HasTarget]) -> dict[str, list[str]]:
    """Each backend of deepbench (dotted name of its folder) and the registered names it serves: the
    folder directly under kernels/backends/ that holds a registered class."""
    units: dict[str, list[str]] = {}
    for name, entry in registry.items():
        module = _target_module(entry)
        if not under(module, BACKENDS) or module == BACKENDS:
            continue
        top = ".".join(module.split(".")[: BACKENDS.count(".") + 2])
        units.setdefault(top, []).append(name)
    return units


def owner(module: str, units: Iterable[str]) -> str | None:
    """The backend `module` belongs to (it, or a package above it, is registered), else None."""
    return next((u for u in units if under(module, u)), None)


def crossings(graph: Mapping[str, set[str]], units: Iterable[str]) -> dict[str, list[str]]:
    """module -> its imports that break the rule (module docstring), each with the reason."""
    units = list(units)
    found: dict[str, list[str]] = {}
    for module, imports in graph.items():
        in_reference = under(module, REFERENCE)
        if not (in_reference or under(module, BACKENDS)):
            continue
        mine = owner(module, units)
        for target in sorted(imports):
            theirs = owner(target, units)
            if in_reference and under(target, BACKENDS):
                why = "kernels/backends, from the reference layer"
            elif theirs is None or theirs == mine:
                continue
            elif mine is None:
                why = "a backend, from a shared module"
            else:
                why = "a sibling backend"
            found.setdefault(module, []).append(f"{target} ({why})")
    return found


def test_the_registry_names_the_backends_the_rule_is_about() -> None:
    """The test's own reading: each kind of backend is found, and a shared module is not one."""
    units = backend_units(REGISTRY)
    for unit in ("pytorch", "cublas", "cudnn", "nvidia", "gloo", "nccl", "mpi", "onnxruntime", "tflite"):
        assert f"{BACKENDS}.{unit}" in units, unit
    assert units[f"{BACKENDS}.nccl"] == ["nccl", "rccl"]
    assert owner(f"{BACKENDS}.cudnn.race_apart", units) == f"{BACKENDS}.cudnn"
    assert owner(f"{BACKENDS}.collectives.common", units) is None
    assert owner(f"{BACKENDS}.gpu.cuda.native", units) is None


class _Entry(NamedTuple):
    target: str


def test_a_backend_is_its_folder() -> None:
    registry: dict[str, str | _HasTarget] = {
        "a": f"{BACKENDS}.a.backend:A",
        "b": _Entry(f"{BACKENDS}.b.backend:B"),
        "b2": f"{BACKENDS}.b.backend:B",
        "plugin": "elsewhere.backend:Plugin",
    }
    assert backend_units(registry) == {f"{BACKENDS}.a": ["a"], f"{BACKENDS}.b": ["b", "b2"]}


def test_the_rule_flags_each_kind_of_crossing() -> None:
    """A toy graph: a sibling import, a shared module importing a backend and a reference leaning on
    kernels/backends are flagged; a backend's own module, a shared module, the registry and the
    reference layer are not."""
    a, b = f"{BACKENDS}.a", f"{BACKENDS}.b"
    shared, ref = f"{BACKENDS}.shared", f"{REFERENCE}.checks"
    graph = {
        f"{a}.ops": {f"{a}.util", shared, BACKENDS, ref, f"{b}.ops"},
        shared: {f"{b}.ops", ref},
        ref: {f"{BACKENDS}.base", f"{PACKAGE}.kernels.precision"},
        f"{PACKAGE}.kernels.harness": {f"{a}.ops"},
    }
    assert crossings(graph, [a, b]) == {
        f"{a}.ops": [f"{b}.ops (a sibling backend)"],
        shared: [f"{b}.ops (a backend, from a shared module)"],
        ref: [f"{BACKENDS}.base (kernels/backends, from the reference layer)"],
    }


@pytest.mark.parametrize("module", sorted(m for m in import_graph() if under(m, BACKENDS) or under(m, REFERENCE)))
def test_no_backend_imports_another(module: str) -> None:
    bad = crossings({module: import_graph()[module]}, backend_units(REGISTRY)).get(module, [])
    assert not bad, (
        f"{module} imports {'; '.join(bad)}: move what both need to kernels/reference/ or a shared module "
        "of kernels/backends/, or load the other backend by name (kernels.backends.load_backend)"
    )


def _reference_closure(roots: Iterable[str], graph: Mapping[str, set[str]]) -> set[str]:
    """The reference modules that importing `roots` loads (package __init__ files included)."""
    todo, seen = list(roots), set()
    while todo:
        module = todo.pop()
        if module in seen or not under(module, REFERENCE):
            continue
        seen.add(module)
        todo.extend(graph.get(module, ()))
        todo.append(module.rpartition(".")[0])
    return seen


def test_the_references_of_the_torchless_backends_import_no_torch() -> None:
    """onnxruntime and LiteRT run on boards without PyTorch: the references they read are numpy's."""
    graph, files = import_graph(), module_files()
    roots = {i for m, imports in graph.items() if m.startswith(TORCHLESS_BACKENDS) for i in imports}
    used = _reference_closure(roots, graph)
    assert f"{REFERENCE}.numpy_checks" in used
    with_torch = sorted(m for m in used if _imports_torch(files[m]))
    assert not with_torch, f"references a torch-less backend loads import torch: {with_torch}"


def _imports_torch(path: Path) -> bool:
    """Whether the file imports torch anywhere (at module level or in a function)."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and not node.level
            else []
        )
        if any(n == TORCH or n.startswith(TORCH + ".") for n in names):
            return True
    return False
