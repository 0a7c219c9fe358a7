"""Where a `raise Unsupported(...)` site can be reached, read from the code around it: the kernel class its
function takes, and the `if` conditions above it, evaluated on one kernel and precision.

A reason's text says what went wrong; the code around its site says for which kernels it can. In

    def prepare(ctx: TorchContext, kernel: SparseGemmKernel, precision: Precision) -> Prepared:
        if kernel.a_t or kernel.b_t:
            raise Unsupported("transposed sparse operands are not in DeepBench's sparse sets")

the reason is given for sparse GEMMs only (the parameter's class), and only for a transposed one (the
condition). `deepbench check` asks this of every `unsupported` result (unsupported_reasons.py), so a
reason copied from another kernel, another operation or another precision is refused. An `if` whose
body returns or raises guards what follows it in its block too (with its condition false).

The conditions are evaluated in three values: true, false or unknown. What the checker knows is the
kernel (its fields: `kernel.a_t`, `kernel.op`), the precision (`precision`, `precision.value`,
`Precision.FP32`), literals and the module's constants built of them (tuples, sets, a dict's keys:
`kernel.op not in OPERATIONS`); `isinstance(kernel, C)` by the class's name. Anything else (a device, a
library's answer, a name imported from elsewhere) is unknown, and unknown never refuses: a site is ruled
out only where one of its conditions is known to be false there. A function's parameter is the kernel
where it is annotated with a kernel class (or named `kernel`), the precision where annotated
`Precision` (or named `precision`); a nested function starts without the conditions around it (it may be
called later, elsewhere)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...kernel import Kernel
from ...precision import Precision

UNKNOWN: Any = type("Unknown", (), {"__repr__": lambda self: "UNKNOWN", "__bool__": None})()
KERNEL_NAME, PRECISION_NAME = "kernel", "precision"  # what an unannotated parameter is by its name
MAX_DEPTH = 8  # a constant defined through this many others is unknown (no cycle can hang the reader)
COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
BUILT = {"frozenset": frozenset, "set": set, "tuple": tuple, "list": list}
EXITS = (ast.Return, ast.Raise)  # a block ending in one of these leaves the function


@dataclass(frozen=True)
class Guard:
    """One condition on the way to a site: `test` must evaluate to `holds` there."""

    test: ast.expr
    holds: bool


@dataclass(frozen=True)
class Scope:
    """What a site's function takes: the names bound to the kernel and to the precision, and the kernel
    classes its annotation names (empty: any kernel)."""

    kernel_names: frozenset[str] = frozenset()
    precision_names: frozenset[str] = frozenset()
    kernel_classes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Site:
    """A `Unsupported(...)` call, the guards on the way to it and the scope it is in."""

    call: ast.Call
    guards: tuple[Guard, ...]
    scope: Scope
    constants: Mapping[str, ast.expr] = field(default_factory=dict, compare=False, hash=False)
    known: frozenset[str] = frozenset()  # the kernel classes' names when the module was read


def kernel_class_names() -> frozenset[str]:
    """The names of the kernel classes: every registered operation's class and the classes above it
    that are kernels too (CollectiveKernel ...)."""
    from ...catalog import KERNEL_CLASSES

    return frozenset(c.__name__ for cls in KERNEL_CLASSES.values() for c in cls.__mro__ if issubclass(c, Kernel))


def module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level NAME = value, assigned once (a name assigned twice is left out: unknown)."""
    seen: dict[str, ast.expr | None] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    seen[t.id] = None if t.id in seen else node.value
    return {name: value for name, value in seen.items() if value is not None}


def sites(tree: ast.Module) -> Iterator[Site]:
    """Every Unsupported(...) call of a module, with its guards and scope."""
    constants = module_constants(tree)
    known = kernel_class_names()
    module_classes = _module_kernel_classes(tree, constants, known)
    yield from _visit(tree, (), Scope(kernel_classes=module_classes), constants, known)


def _visit(
    node: ast.AST, guards: tuple[Guard, ...], scope: Scope, constants: Mapping[str, ast.expr], known: frozenset[str]
) -> Iterator[Site]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope, guards = _scope(node, scope, constants, known), ()
    if isinstance(node, ast.If):
        yield from _visit(node.test, guards, scope, constants, known)
        yield from _block(node.body, (*guards, Guard(node.test, True)), scope, constants, known)
        yield from _block(node.orelse, (*guards, Guard(node.test, False)), scope, constants, known)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Unsupported" and node.args:
        yield Site(node, guards, scope, constants, known)
    for _, value in ast.iter_fields(node):
        if isinstance(value, list) and value and all(isinstance(v, ast.stmt) for v in value):
            yield from _block(value, guards, scope, constants, known)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    yield from _visit(item, guards, scope, constants, known)
        elif isinstance(value, ast.AST):
            yield from _visit(value, guards, scope, constants, known)


def _block(
    stmts: list[ast.stmt],
    guards: tuple[Guard, ...],
    scope: Scope,
    constants: Mapping[str, ast.expr],
    known: frozenset[str],
) -> Iterator[Site]:
    """A block's statements in order: after `if C: ... return` (or raise) the rest runs only where C
    is false (`if isinstance(kernel, CollectiveKernel): return ...` keeps collectives from what follows)."""
    for stmt in stmts:
        yield from _visit(stmt, guards, scope, constants, known)
        if isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and isinstance(stmt.body[-1], EXITS):
            guards = (*guards, Guard(stmt.test, False))


def _annotation_names(node: ast.expr | None, constants: Mapping[str, ast.expr], depth: int = 0) -> set[str]:
    """The class names an annotation names (`A | B`, an alias for one, Optional's parts ...)."""
    if node is None or depth > MAX_DEPTH:
        return set()
    if isinstance(node, ast.Name):
        alias = constants.get(node.id)
        return {node.id} | (_annotation_names(alias, constants, depth + 1) if alias is not None else set())
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.BinOp):
        return _annotation_names(node.left, constants, depth + 1) | _annotation_names(node.right, constants, depth + 1)
    if isinstance(node, ast.Subscript):
        return _annotation_names(node.slice, constants, depth + 1)
    if isinstance(node, ast.Tuple):
        return {n for e in node.elts for n in _annotation_names(e, constants, depth + 1)}
    return set()


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs]


def _scope(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, outer: Scope, constants: Mapping[str, ast.expr], known: frozenset[str]
) -> Scope:
    kernels, precisions, classes = set(), set(), set()
    for arg in _params(fn):
        names = _annotation_names(arg.annotation, constants)
        named = names & known
        if named or (arg.annotation is None and arg.arg == KERNEL_NAME):
            kernels.add(arg.arg)
            classes |= named - {Kernel.__name__}
        elif "Precision" in names or (arg.annotation is None and arg.arg == PRECISION_NAME):
            precisions.add(arg.arg)
    if not kernels:  # a helper that takes no kernel: its module's kernel classes, if it has one kind
        return Scope(kernel_classes=outer.kernel_classes)
    return Scope(frozenset(kernels), frozenset(precisions), frozenset(classes))


def _module_kernel_classes(
    tree: ast.Module, constants: Mapping[str, ast.expr], known: frozenset[str]
) -> frozenset[str]:
    """The kernel classes a module's functions take, where they all take the same (a module about one
    kind of kernel: models/instance.py takes ModelKernel); empty otherwise."""
    seen: set[frozenset[str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in _params(node):
                named = _annotation_names(arg.annotation, constants) & known
                if named:
                    seen.add(frozenset(named))
    only = next(iter(seen)) if len(seen) == 1 else frozenset()
    return only - {Kernel.__name__}


def reachable(site: Site, kernel: Kernel, precision: Precision) -> bool:
    """Whether the site can raise for this kernel and precision: its function takes such a kernel, and
    no condition on the way is known to be otherwise."""
    mro = {c.__name__ for c in type(kernel).__mro__}
    if site.scope.kernel_classes and not (site.scope.kernel_classes & mro):
        return False
    env = Env(site.scope, kernel, precision, site.constants, site.known)
    for guard in site.guards:
        value = env.eval(guard.test)
        if value is not UNKNOWN and _truth(value) is not None and _truth(value) != guard.holds:
            return False
    return True


def _truth(value: Any) -> bool | None:
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - a value without a truth: unknown
        return None


@dataclass
class Env:
    """The three-valued evaluator of one site's conditions for one kernel and precision."""

    scope: Scope
    kernel: Kernel
    precision: Precision
    constants: Mapping[str, ast.expr]
    known: frozenset[str]

    def eval(self, node: ast.expr, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            return UNKNOWN
        try:
            return self._eval(node, depth)
        except Exception:  # noqa: BLE001 - an expression the reader cannot follow: unknown
            return UNKNOWN

    def _eval(self, node: ast.expr, depth: int) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, depth)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, depth)
        if isinstance(node, ast.BoolOp):
            return self._bool_op(node, depth)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.eval(node.operand, depth + 1)
            return UNKNOWN if inner is UNKNOWN or _truth(inner) is None else not _truth(inner)
        if isinstance(node, ast.Compare):
            return self._compare(node, depth)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.eval(e, depth + 1) for e in node.elts]
            if any(i is UNKNOWN for i in items):
                return UNKNOWN
            return set(items) if isinstance(node, ast.Set) else tuple(items)
        if isinstance(node, ast.Dict):
            keys = [self.eval(k, depth + 1) if k is not None else UNKNOWN for k in node.keys]
            return UNKNOWN if any(k is UNKNOWN for k in keys) else dict.fromkeys(keys, UNKNOWN)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        return UNKNOWN

    def _name(self, name: str, depth: int) -> Any:
        if name in self.scope.kernel_names:
            return self.kernel
        if name in self.scope.precision_names:
            return self.precision
        if name == Precision.__name__:
            return Precision
        if name in self.constants:
            return self.eval(self.constants[name], depth + 1)
        return UNKNOWN

    def _attribute(self, node: ast.Attribute, depth: int) -> Any:
        base = self.eval(node.value, depth + 1)
        if base is self.kernel and node.attr in type(self.kernel).model_fields:
            return getattr(self.kernel, node.attr)
        if base is Precision or isinstance(base, Precision):
            value = getattr(base, node.attr)
            return UNKNOWN if callable(value) and not isinstance(value, Precision) else value
        return UNKNOWN

    def _bool_op(self, node: ast.BoolOp, depth: int) -> Any:
        values = [_truth(v) if v is not UNKNOWN else None for v in (self.eval(e, depth + 1) for e in node.values)]
        decisive = not isinstance(node.op, ast.And)  # `or` is decided by a true operand, `and` by a false one
        if decisive in values:
            return decisive
        return not decisive if all(v is not None for v in values) else UNKNOWN

    def _compare(self, node: ast.Compare, depth: int) -> Any:
        left = self.eval(node.left, depth + 1)
        result = True
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node, depth + 1)
            fn = COMPARE.get(type(op))
            if left is UNKNOWN or right is UNKNOWN or fn is None:
                return UNKNOWN
            result = result and bool(fn(left, right))
            left = right
        return result

    def _call(self, node: ast.Call, depth: int) -> Any:
        if not isinstance(node.func, ast.Name):
            return UNKNOWN
        if node.func.id == "isinstance" and len(node.args) == 2 and self.eval(node.args[0], depth + 1) is self.kernel:
            names = _annotation_names(node.args[1], self.constants) & self.known
            return bool(names & {c.__name__ for c in type(self.kernel).__mro__}) if names else UNKNOWN
        if node.func.id in BUILT and len(node.args) == 1:
            inner = self.eval(node.args[0], depth + 1)
            return UNKNOWN if inner is UNKNOWN else BUILT[node.func.id](inner)
        return UNKNOWN
