"""Suites (which kernels) and selection (which of them, by operation, parameters, count).

`train`, `inference-server` and `inference-device` are exactly DeepBench's sets; `smoke` is a
handful of real DeepBench kernels small enough for a CPU in seconds (data/smoke.json); `layers`
is Alibaba AI Matrix's layer-based benchmark (conv, fully connected, pooling, batch norm,
activations, softmax, LSTM/GRU shapes from AlexNet, GoogLeNet, VGG-16, ResNet, DenseNet-121;
data/ai_matrix.json, imported by tests/tools/import_ai_matrix.py); `sparse-2of4` is not DeepBench's:
DeepBench's sparse GEMM shapes with 2:4 structured sparsity, the sparsity today's sparse tensor
cores accelerate (cuSPARSELt), each beside the dense GEMM of its shape; `collectives` is every
collective (kernels/collective_kernels.py) at DeepBench's all-reduce sizes plus nccl-tests' default
power-of-two sweep (data/collectives.json).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any, Final

from .catalog import KERNEL_CLASSES, AllReduceKernel, Kernel, Sparse24GemmKernel, SparseGemmKernel, by_id, catalog
from .collective_kernels import COLLECTIVES_BY_OP
from .costs import FLOAT32_BYTES

SUITES: dict[str, str | None] = {
    "train": "train",
    "inference-server": "inference_server",
    "inference-device": "inference_device",
    "smoke": None,
    "layers": None,  # AI Matrix's layer lists (data/ai_matrix.json), set "layers"
    "sparse-2of4": None,  # DeepBench's sparse GEMM shapes, 2:4 structured (not DeepBench's), set "sparse_2of4"
    "collectives": None,  # every collective, DeepBench's all-reduce sizes and nccl-tests' sweep, set "collectives"
}
COLLECTIVES_SET: Final = "collectives"
LAYERS_SET: Final = "layers"
STRUCTURED_SPARSE_SUITE: Final = "sparse-2of4"
STRUCTURED_SPARSE_SET: Final = "sparse_2of4"
# The DeepBench sets whose sparse GEMM shapes the 2:4 suite takes (training has no sparse GEMM).
STRUCTURED_SPARSE_SOURCES: Final = ("inference_server", "inference_device")


class SelectionError(ValueError):
    """A user's selection is malformed; the message names the valid choices."""


MODEL_PREFIX = "model:"  # model:NAME or model:FILE: a real model's operators (kernels/models)
MODEL_SUITES_CACHED = 8  # (model, batch, seq) suites kept per process


def suite_kernels(suite: str, batch: int | None = None, seq: int | None = None) -> list[Kernel]:
    if suite.startswith(MODEL_PREFIX):
        return model_kernels(suite[len(MODEL_PREFIX) :], batch, seq)
    if batch is not None or seq is not None:
        raise SelectionError("--batch and --seq apply to model suites only (--suite model:NAME)")
    if suite not in SUITES:
        raise SelectionError(f"unknown suite '{suite}' (choose from: {', '.join(SUITES)}, model:NAME)")
    if suite == "smoke":
        data = json.loads((resources.files(__package__) / "data" / "smoke.json").read_text())
        return [by_id()[i] for i in data["kernels"]]
    if suite == LAYERS_SET:
        return list(layer_suite())
    if suite == STRUCTURED_SPARSE_SUITE:
        return list(structured_sparse_suite())
    if suite == COLLECTIVES_SET:
        return list(collective_suite())
    return [k for k in catalog() if k.set == SUITES[suite]]


@cache
def layer_suite() -> tuple[Kernel, ...]:
    """AI Matrix's layer-based benchmark as kernels, per operation in the data file's order (the
    index is the position in that operation's list, so ids stay put while the file does)."""
    data = json.loads((resources.files(__package__) / "data" / "ai_matrix.json").read_text())
    out: list[Kernel] = []
    for op, entries in data["kernels"].items():
        cls = KERNEL_CLASSES[op]
        out += [
            cls(set=LAYERS_SET, index=i, application=e["application"], **e["params"]) for i, e in enumerate(entries)
        ]
    return tuple(out)


@cache
def structured_sparse_suite() -> tuple[Kernel, ...]:
    """One 2:4 kernel per distinct (m, n, k) of DeepBench's sparse GEMMs (server, then device),
    in order of first occurrence, with the application of that occurrence. DeepBench's layout
    (no transposes) is kept; its unstructured sparsity (90-95%) becomes 2:4's fixed 50%."""
    shapes: dict[tuple[int, int, int], str | None] = {}
    for k in catalog():
        if isinstance(k, SparseGemmKernel) and k.set in STRUCTURED_SPARSE_SOURCES:
            shapes.setdefault((k.m, k.n, k.k), k.application)
    return tuple(
        Sparse24GemmKernel(set=STRUCTURED_SPARSE_SET, index=i, application=app, m=m, n=n, k=kk, a_t=False, b_t=False)
        for i, ((m, n, kk), app) in enumerate(shapes.items())
    )


@cache
def collective_suite() -> tuple[Kernel, ...]:
    """Per operation of data/collectives.json, DeepBench's all-reduce sizes merged with nccl-tests'
    sweep (bytes / 4 floats), ascending; the index is the position in that list."""
    data = json.loads((resources.files(__package__) / "data" / "collectives.json").read_text())
    sweep = data["sweep"]
    repeats = {k.floats: k.repeat for k in catalog() if isinstance(k, AllReduceKernel)}
    size = sweep["min_bytes"]
    while size <= sweep["max_bytes"]:
        floats = size // FLOAT32_BYTES
        if floats:
            repeats.setdefault(floats, data["repeat"] if floats < data["repeat_floats_below"] else data["repeat_large"])
        size *= sweep["factor"]
    sizes = sorted(repeats.items())
    return tuple(
        COLLECTIVES_BY_OP[op](op=op, set=COLLECTIVES_SET, index=i, floats=floats, repeat=repeat)
        for op in data["ops"]
        for i, (floats, repeat) in enumerate(sizes)
    )


def model_kernels(spec: str, batch: int | None, seq: int | None) -> list[Kernel]:
    """The kernels of a model's operator dataset (operators with no kernel type are left out here;
    `deepbench models extract` lists them with the reason), then the whole model as one kernel
    (op "model", kernels/model_kernel.py) when this tool can build the model."""
    return list(_model_kernels(spec, batch, seq))


@lru_cache(maxsize=MODEL_SUITES_CACHED)
def _model_kernels(spec: str, batch: int | None, seq: int | None) -> tuple[Kernel, ...]:
    """Extracted once per process: a run selects from the suite and hashes the whole of it."""
    from .model_kernel import whole_model_kernel
    from .models.suite import dataset_kernels, load_dataset

    for flag, value in (("--batch", batch), ("--seq", seq)):
        if value is not None and value < 1:
            raise SelectionError(f"{flag} must be at least 1, not {value}")
    try:
        ds = load_dataset(spec, batch, seq)
    except ValueError as exc:
        raise SelectionError(str(exc)) from None
    whole = whole_model_kernel(ds)
    return tuple(dataset_kernels(ds)[0] + ([whole] if whole else []))


def parse_ops(text: str | None) -> list[str] | None:
    if not text:
        return None
    ops = [o.strip() for o in text.split(",") if o.strip()]
    for o in ops:
        if o not in KERNEL_CLASSES:  # DeepBench's operations, then the layer benchmarks (kernels/layers.py)
            raise SelectionError(f"unknown operation '{o}' (choose from: {', '.join(KERNEL_CLASSES)})")
    return ops


_COMPARATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "!=": operator.ne,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_WHERE = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|!=|=|<|>)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: str

    def matches(self, kernel: Kernel) -> bool:
        if self.field not in kernel.FIELDS and self.field != "application":
            return False
        actual = getattr(kernel, self.field)
        if actual is None:  # an unset optional field (a vision model's seq) matches no condition
            return False
        return _COMPARATORS[self.op](actual, _coerce(actual, self.value))


def _coerce(actual: object, text: str) -> object:
    if isinstance(actual, bool):
        return text.lower() in ("1", "true", "t", "yes")
    if isinstance(actual, int):
        return int(text)
    if isinstance(actual, float):
        return float(text)
    return text


def parse_where(clauses: Sequence[str] | None) -> list[Condition]:
    """`m=1760`, `cell=lstm`, `n<=64`, several per clause separated by commas."""
    fields = sorted({f for cls in KERNEL_CLASSES.values() for f in cls.FIELDS} | {"application"})
    out = []
    for clause in clauses or ():
        for part in clause.split(","):
            m = _WHERE.match(part)
            if not m:
                raise SelectionError(f"malformed filter '{part}' (expected FIELD=VALUE, or <, <=, >, >=, !=)")
            field, op, value = m.groups()
            if field not in fields:
                raise SelectionError(f"unknown field '{field}' in filter (choose from: {', '.join(fields)})")
            cond = Condition(field, op, value)
            for cls in KERNEL_CLASSES.values():
                if field in cls.FIELDS:
                    sample = {
                        "a_t": False,
                        "b_t": False,
                        "sparsity": 0.0,
                        "cell": "",
                        "mode": "",
                        "kind": "",
                        "function": "",
                        "causal": False,
                        "model": "",
                    }.get(field, 0)
                    try:
                        _coerce(sample, value)
                    except ValueError:
                        raise SelectionError(f"bad value '{value}' for field '{field}' in filter") from None
            out.append(cond)
    return out


def select(
    suite: str,
    ops: Sequence[str] | None = None,
    where: Sequence[Condition] = (),
    limit: int | None = None,
    batch: int | None = None,
    seq: int | None = None,
) -> list[Kernel]:
    """The suite's kernels, kept in DeepBench's order; `where` keeps kernels matching every
    condition (a condition on a field an operation lacks excludes that operation's kernels);
    `limit` keeps the first N per operation."""
    return narrow(suite_kernels(suite, batch, seq), ops, where, limit)


def narrow(
    kernels: Sequence[Kernel],
    ops: Sequence[str] | None = None,
    where: Sequence[Condition] = (),
    limit: int | None = None,
) -> list[Kernel]:
    """`select` on a suite already built (a run hashes the whole suite and selects from it)."""
    if limit is not None and limit < 1:
        raise SelectionError("--limit must be at least 1")
    chosen = [k for k in kernels if (ops is None or k.op in ops) and all(c.matches(k) for c in where)]
    if limit is None:
        return chosen
    seen: dict[str, int] = {}
    out = []
    for k in chosen:
        seen[k.op] = seen.get(k.op, 0) + 1
        if seen[k.op] <= limit:
            out.append(k)
    return out
