"""DeepBench's 629 kernels as typed models, one class per operation, in DeepBench's order.

The data files in `data/` are DeepBench's `*_problems.h` lists (see data/README.md); each kernel
knows its position in its set, the application it came from (where DeepBench's kernel
workbooks name one), its FLOP count and the fewest bytes it must move (formulas in `costs`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Field, TypeAdapter

from . import costs
from .collective_kernels import NCCL_TESTS_KERNELS, AllReduceKernel
from .kernel import Kernel
from .layers import LAYER_KERNELS
from .model_kernel import ModelKernel
from .op_traits import InfoColumn, OpTraits, Tolerance
from .precision import INPUT_BYTES, OUTPUT_BYTES, Precision

OPS: tuple[str, ...] = ("gemm", "conv", "rnn", "sparse_gemm", "all_reduce")
SETS: tuple[str, ...] = ("train", "inference_server", "inference_device")


# DeepBench's workbook words for GEMM's fields (shared by the sparse GEMM).
GEMM_HEADERS = {"m": "M", "n": "N", "k": "K", "a_t": "A Transpose", "b_t": "B Transpose"}


class GemmKernel(Kernel):
    """C (m x n) = op(A) op(B), column-major, as DeepBench hands it to the library."""

    FIELDS: ClassVar[tuple[str, ...]] = ("m", "n", "k", "a_t", "b_t")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Dense matrix multiplication", field_headers=GEMM_HEADERS)
    op: Literal["gemm"] = "gemm"
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    a_t: bool
    b_t: bool

    def flops(self, direction: str = "fwd") -> float:
        return costs.gemm_flops(self.m, self.n, self.k)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return costs.gemm_bytes(self.m, self.n, self.k, INPUT_BYTES[precision], OUTPUT_BYTES[precision])


class ConvKernel(Kernel):
    """NCHW convolution; s is the filter width, r its height (DeepBench's names)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("w", "h", "c", "n", "k", "s", "r", "pad_w", "pad_h", "stride_w", "stride_h")
    DIRECTIONS: ClassVar[tuple[str, ...]] = ("fwd", "bwd_data", "bwd_filter")
    INFERENCE_FORWARD_ONLY: ClassVar[bool] = True  # conv_bench.cu: `if (!inference)` guards the backward
    TRAITS: ClassVar[OpTraits | None] = OpTraits(
        "Convolution",
        tolerance=Tolerance.TRANSFORM,
        field_headers={
            "w": "W",
            "h": "H",
            "c": "C",
            "n": "N",
            "k": "K",
            "s": "S (Filter width)",
            "r": "R (Filter height)",
            "stride_w": "Horizontal stride",
            "stride_h": "Vertical stride",
        },
    )
    op: Literal["conv"] = "conv"
    w: int = Field(gt=0)
    h: int = Field(gt=0)
    c: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    s: int = Field(gt=0)
    r: int = Field(gt=0)
    pad_w: int = Field(ge=0)
    pad_h: int = Field(ge=0)
    stride_w: int = Field(gt=0)
    stride_h: int = Field(gt=0)

    @property
    def out_w(self) -> int:
        return costs.conv_output_size(self.w, self.s, self.pad_w, self.stride_w)

    @property
    def out_h(self) -> int:
        return costs.conv_output_size(self.h, self.r, self.pad_h, self.stride_h)

    def flops(self, direction: str = "fwd") -> float:
        return costs.conv_flops(self.n, self.c, self.k, self.r, self.s, self.out_h, self.out_w)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        x = self.n * self.c * self.h * self.w
        w = self.k * self.c * self.r * self.s
        y = self.n * self.k * self.out_h * self.out_w
        return costs.conv_bytes(direction, x, w, y, INPUT_BYTES[precision])


class RnnKernel(Kernel):
    """A recurrent layer: vanilla (ReLU), LSTM (no peepholes) or GRU; input size = hidden."""

    FIELDS: ClassVar[tuple[str, ...]] = ("hidden", "batch", "timesteps", "cell")
    DIRECTIONS: ClassVar[tuple[str, ...]] = ("fwd", "bwd")
    TRAITS: ClassVar[OpTraits | None] = OpTraits(
        "Recurrent layers",
        tolerance=Tolerance.RECURRENCE,
        field_headers={"hidden": "Hidden units", "batch": "N", "timesteps": "Timesteps", "cell": "Cell"},
        direction_headers={"fwd": "Time Forward (msec)"},
    )
    op: Literal["rnn"] = "rnn"
    hidden: int = Field(gt=0)
    batch: int = Field(gt=0)
    timesteps: int = Field(gt=0)
    cell: Literal["vanilla", "lstm", "gru"]

    def flops(self, direction: str = "fwd", input_projection: bool = False) -> float:
        return costs.rnn_flops(direction, self.cell, self.hidden, self.batch, self.timesteps, input_projection)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return costs.rnn_bytes(direction, self.cell, self.hidden, self.batch, self.timesteps, INPUT_BYTES[precision])


# The sparse products' extra columns: the dense GEMM of the same shape, timed beside them.
DENSE_BESIDE_COLUMNS = (
    InfoColumn("dense (us)", ("dense_time_us", "median"), "us", droppable=True),
    InfoColumn("speedup", ("speedup_vs_dense",)),
)
DENSE_BESIDE_EXTRAS = (("speedup", "speedup_vs_dense"),)


class SparseGemmKernel(Kernel):
    """Sparse A (m x k, `sparsity` of its entries zero) times dense B (k x n)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("m", "n", "k", "a_t", "b_t", "sparsity")
    TRAITS: ClassVar[OpTraits | None] = OpTraits(
        "Sparse matrix multiplication",
        field_headers={**GEMM_HEADERS, "sparsity": "Sparsity"},
        run_columns=DENSE_BESIDE_COLUMNS,
        entry_extras=DENSE_BESIDE_EXTRAS,
    )
    op: Literal["sparse_gemm"] = "sparse_gemm"
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    a_t: bool
    b_t: bool
    sparsity: float = Field(ge=0.0, lt=1.0)

    def flops(self, direction: str = "fwd") -> float:
        return costs.sparse_gemm_flops(self.m, self.n, self.k, self.sparsity)

    def dense_flops(self) -> float:
        return costs.gemm_flops(self.m, self.n, self.k)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return costs.sparse_gemm_bytes(self.m, self.n, self.k, self.sparsity, INPUT_BYTES[precision])


class Sparse24GemmKernel(Kernel):
    """2:4 structured sparse A (m x k: two of every four consecutive entries along k are zero, 50%)
    times dense B (k x n); not one of DeepBench's operations (suite `sparse-2of4`).

    This is the sparsity today's sparse tensor cores accelerate (cuSPARSELt). FLOPs are the
    products actually made, by DeepBench's sparse rule (`costs.sparse_gemm_flops` at sparsity
    0.5): half the dense GEMM's, so its TFLOP/s compare with the unstructured sparse GEMM's; the
    dense GEMM of the same shape is timed beside it (`dense_time_us`, `speedup_vs_dense`)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("m", "n", "k", "a_t", "b_t")
    TRAITS: ClassVar[OpTraits | None] = OpTraits(
        "2:4 structured sparse matrix multiplication",
        field_headers=GEMM_HEADERS,
        run_columns=DENSE_BESIDE_COLUMNS,
        entry_extras=DENSE_BESIDE_EXTRAS,
    )
    op: Literal["sparse24_gemm"] = "sparse24_gemm"
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    a_t: bool
    b_t: bool

    @property
    def sparsity(self) -> float:
        """The fraction of A that is zero (fixed: two of every four)."""
        return costs.STRUCTURED_SPARSITY

    def flops(self, direction: str = "fwd") -> float:
        return costs.sparse_gemm_flops(self.m, self.n, self.k, self.sparsity)

    def dense_flops(self) -> float:
        return costs.gemm_flops(self.m, self.n, self.k)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return costs.structured_sparse_gemm_bytes(
            self.m, self.n, self.k, INPUT_BYTES[precision], OUTPUT_BYTES[precision]
        )


# Layer benchmarks (kernels/layers.py) and the whole-model run (kernels/model_kernel.py) subclass Kernel too.

_CLASSES: tuple[type[Kernel], ...] = (
    GemmKernel,
    ConvKernel,
    RnnKernel,
    SparseGemmKernel,
    Sparse24GemmKernel,
    AllReduceKernel,
    *NCCL_TESTS_KERNELS,
    *LAYER_KERNELS,
    ModelKernel,
)
KERNEL_CLASSES: dict[str, type[Kernel]] = {cls.model_fields["op"].default: cls for cls in _CLASSES}


KERNEL_DISCRIMINATOR = "op"


def _any_kernel() -> Any:
    """Every registered kernel class, told apart by its `op` (the registry's order)."""
    # Union[tuple] is the union of the tuple's types; ruff's UP007 fix would drop the Union, not spell it X | Y.
    return Annotated[Union[tuple(KERNEL_CLASSES.values())], Field(discriminator=KERNEL_DISCRIMINATOR)]  # noqa: UP007


AnyKernel = _any_kernel()
KERNEL_ADAPTER: TypeAdapter = TypeAdapter(AnyKernel)


def register_kernel(cls: type[Kernel]) -> type[Kernel]:
    """Add an operation's kernel class to the registry (usable as a class decorator), so that
    plans, results and reports take its kernels: an operation outside this package (a plugin, a
    test's toy operation) is its kernel class with its traits, its costs and a backend."""
    op = cls.model_fields["op"].default
    if not isinstance(op, str) or not op:
        raise ValueError(f"{cls.__name__} must give `op` a default: its operation's name")
    if KERNEL_CLASSES.get(op) is not cls:
        KERNEL_CLASSES[op] = cls
        _rebuild_union()
    return cls


def unregister_kernel(op: str) -> None:
    """Remove an operation added by `register_kernel` (a test's toy operation, once done)."""
    if KERNEL_CLASSES.pop(op, None) is not None:
        _rebuild_union()


# Modules whose models hold the union (kernels/results.py) register here to rebuild them when it changes:
# the catalog cannot import them (they import the catalog).
_UNION_LISTENERS: list[Callable[[Any], None]] = []


def on_union_change(listener: Callable[[Any], None]) -> None:
    """Call `listener(new AnyKernel)` whenever an operation is registered or removed."""
    _UNION_LISTENERS.append(listener)


def _rebuild_union() -> None:
    """Plans and results validate kernels through the `AnyKernel` union, which pydantic builds
    into each model when the model is made: rebuild the union, then tell the modules whose models
    hold it."""
    global AnyKernel, KERNEL_ADAPTER
    AnyKernel = _any_kernel()
    KERNEL_ADAPTER = TypeAdapter(AnyKernel)
    for listener in _UNION_LISTENERS:
        listener(AnyKernel)


def traits_of(op: str) -> OpTraits:
    """The traits of a registered operation; an unknown name (a record of an operation this
    version does not know) gets plain traits titled by its name."""
    cls = KERNEL_CLASSES.get(op)
    traits = cls.TRAITS if cls is not None else None
    return traits if traits is not None else OpTraits(title=op)


def operations() -> tuple[str, ...]:
    """Every registered operation, in report order (DeepBench's, then layers, then models)."""
    return tuple(KERNEL_CLASSES)


def _data(name: str) -> dict:
    return json.loads(resources.files(__package__).joinpath("data").joinpath(name).read_text())


@cache
def catalog() -> tuple[Kernel, ...]:
    """Every DeepBench kernel, grouped by operation then set, each in DeepBench's order."""
    applications = _data("applications.json")
    out: list[Kernel] = []
    for op in OPS:
        data = _data(f"{op}.json")
        cls = KERNEL_CLASSES[op]
        assert tuple(data["fields"]) == cls.FIELDS, f"{op}: fields changed in the data file"
        for set_name, kernels in data["sets"].items():
            names = applications.get(op, {}).get(set_name, [])
            for i, raw in enumerate(kernels):
                app = names[i] if i < len(names) else None
                out.append(cls(set=set_name, index=i, application=app, **raw))
    return tuple(out)


@cache
def by_id() -> dict[str, Kernel]:
    return {k.id: k for k in catalog()}
