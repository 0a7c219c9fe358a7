"""The reasons each backend can give for an `unsupported` result, read from the backend's own code.

A result is `unsupported` when a backend raises `Unsupported(reason)` (base.py). `deepbench check`
accepts an unsupported result only with a reason its backend could have given for that operation
and precision, so a bundle cannot turn a slow `ok` result into a blank `unsupported` one. The
table is not written by hand: it is derived from the `raise Unsupported(...)` sites of the
backend's package (and of the shared modules beside it) with Python's own parser, so it follows
the code. Each site becomes a regular expression: literal text as is, `{precision.value}` as the
result's precision, `{kernel.op}` as its operation, any other placeholder as some text; a name
refers to the module's string constant (or to every value of a constant dict). A site whose text
is all placeholders (`Unsupported(str(exc))`) gives no pattern: nothing could be checked against it.
A site in a module named after an operation (gemm.py, rnn_cudnn.py) applies to that operation only.

The text is not enough: "transposed sparse operands are not in DeepBench's sparse sets" is a reason the
torch backend gives, but only for a sparse GEMM, and only a transposed one. So each site also keeps where
it is (reason_guards.py): the kernel class its function takes and the `if` conditions on the way to it,
evaluated on the result's own kernel and precision (`can_refuse`). A backend's declaration answers the
checker's question with this by default (declaration.py `may_refuse`), and may answer it itself.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ...kernel import Kernel
from ...precision import Precision
from .. import BACKENDS, declaration_of
from .reason_guards import Site, reachable, sites

BACKENDS_DIR = Path(__file__).resolve().parents[1]
PACKAGE = "deepbench.kernels.backends"  # what a backend outside the package imports the layers as
# Code beside the backends whose Unsupported reasons any backend may pass on (model building), or
# that the harness gives for any backend (declared_precisions.py: a precision it does not declare).
SHARED_SOURCES = (BACKENDS_DIR.parent / "models" / "instance.py", Path(__file__).with_name("declared_precisions.py"))
# Fewer literal characters than this and a pattern would accept nearly any text.
MIN_LITERAL_CHARS = 8
ANY = "(?s:.+?)"
BACKEND_MODULE = "backend"  # <folder>/backend.py holds the class of a backend whose folder is all its own


@dataclass(frozen=True)
class Reason:
    """One `raise Unsupported(...)` site: its pattern, the operation its module is about (None:
    any), and whether the text may have been cut short (a `[:N]` slice)."""

    pattern: str
    op: str | None
    truncated: bool
    where: str
    precisions: frozenset[str] = frozenset()  # precisions its fixed text names (none: any precision)
    site: Site | None = None  # where it is raised: its function's kernel class and the conditions on the way

    def matches(self, reason: str, op: str, precision: str) -> bool:
        if self.op is not None and self.op != op:
            return False
        if self.precisions and precision not in self.precisions:
            return False
        regex = self.pattern.replace(_PRECISION, re.escape(precision)).replace(_OP, re.escape(op))
        if re.fullmatch(regex, reason):
            return True
        return self.truncated and re.match(regex.split(ANY)[0], reason) is not None

    def applies(self, reason: str, kernel: Kernel, precision: Precision) -> bool:
        """Whether this site can give `reason` for this very kernel and precision: its text matches,
        and the code on the way to it can be reached by them (reason_guards.reachable)."""
        if not self.matches(reason, kernel.op, precision.value):
            return False
        return self.site is None or reachable(self.site, kernel, precision)


_PRECISION, _OP = "\x00P\x00", "\x00O\x00"


def _constants(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """Module-level NAME = <str or f-string or dict of them>."""
    out: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    value = node.value
                    out[t.id] = list(value.values) if isinstance(value, ast.Dict) else [value]
    return out


def _patterns(node: ast.expr, consts: dict[str, list[ast.expr]], depth: int = 0) -> list[tuple[str, bool]]:
    """(regex, truncated) alternatives for the text of `node`."""
    if depth > 5:
        return [(ANY, False)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(re.escape(node.value), False)]
    if isinstance(node, ast.JoinedStr):
        text = ""
        for piece in node.values:
            if isinstance(piece, ast.Constant):
                text += re.escape(str(piece.value))
            else:
                src = ast.unparse(piece.value) if isinstance(piece, ast.FormattedValue) else ""
                text += _PRECISION if src == "precision.value" else _OP if src == "kernel.op" else ANY
        return [(text, False)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [
            (a + b, ta or tb)
            for a, ta in _patterns(node.left, consts, depth + 1)
            for b, tb in _patterns(node.right, consts, depth + 1)
        ]
    if isinstance(node, ast.Name) and node.id in consts:
        return [p for v in consts[node.id] for p in _patterns(v, consts, depth + 1)]
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Slice):  # text[:N]: cut short
            return [(p, True) for p, _ in _patterns(node.value, consts, depth + 1)]
        return _patterns(node.value, consts, depth + 1)  # a constant dict's entry: any of its values
    if isinstance(node, ast.IfExp):
        return _patterns(node.body, consts, depth + 1) + _patterns(node.orelse, consts, depth + 1)
    return [(ANY, False)]


def _literal_chars(pattern: str) -> int:
    return len(re.sub(r"\\(.)", r"\1", pattern.replace(ANY, "").replace(_PRECISION, "").replace(_OP, "")))


def _named(pattern: str) -> frozenset[str]:
    """The precisions a reason's fixed text names ("fp8 GEMM needs ..."): it was given for one of
    them. A reason that names the precision it was given for ({precision.value}) names none here."""
    if _PRECISION in pattern:
        return frozenset()
    text = re.sub(r"\\(.)", r"\1", pattern)
    return frozenset(p.value for p in Precision if re.search(rf"\b{p.value}\b", text))


def _op_of(path: Path, ops: set[str]) -> str | None:
    stem = path.stem
    for op in sorted(ops, key=len, reverse=True):
        if stem == op or stem.startswith(op + "_"):
            return op
    return None


def reasons_in(path: Path, ops: set[str]) -> list[Reason]:
    """The Unsupported reasons raised in one source file."""
    tree = ast.parse(path.read_text(), str(path))
    consts = _constants(tree)
    op = _op_of(path, ops)
    out = []
    for site in sites(tree):
        node = site.call
        for pattern, truncated in _patterns(node.args[0], consts):
            if _literal_chars(pattern) >= MIN_LITERAL_CHARS:
                out.append(Reason(pattern, op, truncated, f"{path.name}:{node.lineno}", _named(pattern), site))
    return out


def _module_path(module: str) -> Path | None:
    """The file of `module` (a package: its folder), found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    return origin.parent if origin.name == "__init__.py" else origin


def _backend_folders() -> set[Path]:
    """The folders that hold a registered backend's class (their backend.py's folder)."""
    out = set()
    for entry in BACKENDS.values():
        module = entry.target.split(":")[0]
        path = _module_path(module)
        if path is not None and module.rsplit(".", 1)[-1] == BACKEND_MODULE:
            out.add(path.parent)
    return out


def _sources(backend: str) -> list[Path]:
    """The backend's files: its folder (where its class is in the folder's backend.py), else its one
    module; the modules of the shared layers (contract, gpu, cpu, shared, collectives) that they
    import, directly or through each other; and the shared sources."""
    entry = BACKENDS.get(backend)
    path = _module_path(entry.target.split(":")[0]) if entry is not None else None
    if path is None:
        return []
    module = entry.target.split(":")[0]  # type: ignore[union-attr]
    files = sorted(path.parent.rglob("*.py")) if module.endswith("." + BACKEND_MODULE) else [path]
    return files + _layer_modules(files) + list(SHARED_SOURCES)


def _imported_files(path: Path) -> set[Path]:
    """The files under kernels/backends/ that `path`'s imports name (a module, or a package's names that
    are modules): relative imports, and the absolute ones a backend outside the package makes."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            target = base.joinpath(*node.module.split(".")) if node.module else base
        elif (node.module or "").startswith(PACKAGE + "."):
            target = BACKENDS_DIR.joinpath(*(node.module or "").split(".")[PACKAGE.count(".") + 1 :])
        else:
            continue
        candidates = [target.with_suffix(".py"), *(target / f"{a.name}.py" for a in node.names)]
        out |= {c.resolve() for c in candidates if c.is_file() and BACKENDS_DIR in c.resolve().parents}
    return out


def _layer_modules(files: list[Path]) -> list[Path]:
    """The shared layers' modules these files import, and those that those import: their reasons
    are the backend's too. Another backend's folder is never entered (no backend imports another)."""
    folders = _backend_folders()
    seen, todo = set(files), list(files)
    while todo:
        for found in _imported_files(todo.pop()):
            if found not in seen and not any(f in found.parents for f in folders):
                seen.add(found)
                todo.append(found)
    return sorted(seen - set(files))


@cache
def backend_reasons(backend: str) -> tuple[Reason, ...]:
    """Every reason `backend` (and the backends it delegates to) can give."""
    from ...catalog import operations

    ops = set(operations())
    files = {p for b in (backend, *declaration_of(backend).delegates) for p in _sources(b)}
    return tuple(r for path in sorted(files) for r in reasons_in(path, ops))


def could_give(backend: str, reason: str, op: str, precision: str) -> bool:
    """Whether `backend` can give `reason` for some `op` kernel in `precision` (by the text and the
    operation alone: can_refuse asks of one kernel)."""
    return any(r.matches(reason, op, precision) for r in backend_reasons(backend))


@dataclass(frozen=True)
class BackendSites:
    """A backend's raise sites (declaration.RaiseSites): what its declaration's `may_refuse` asks."""

    backend: str

    def give(self, reason: str, kernel: Kernel, precision: Precision) -> bool:
        return any(r.applies(reason, kernel, precision) for r in backend_reasons(self.backend))


def can_refuse(backend: str, kernel: Kernel, precision: Precision, reason: str, device: str = "cpu") -> bool:
    """Whether a result of `backend` may be unsupported for `reason` with this kernel in this precision
    on `device`: what its declaration answers (`may_refuse`), by default from its code's raise sites."""
    return declaration_of(backend).may_refuse(kernel, precision, reason, device, BackendSites(backend))
