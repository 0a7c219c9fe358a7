"""DeepBench's 629 kernels as typed models, one class per operation, in DeepBench's order.

The data files in `data/` are DeepBench's `*_problems.h` lists (see data/README.md); each kernel
knows its position in its set, the application it came from (where DeepBench's kernel
workbooks name one), its FLOP count and the fewest bytes it must move (formulas in `costs`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from . import costs
from .precision import INPUT_BYTES, OUTPUT_BYTES, Precision

# "model": a shape taken from a real model's operator dataset (kernels/models; application = the model)
# "layers": AI Matrix's layer-based benchmark lists (data/ai_matrix.json; suite `layers`)
SetName = Literal["train", "inference_server", "inference_device", "model", "layers"]
OPS: tuple[str, ...] = ("gemm", "conv", "rnn", "sparse_gemm", "all_reduce")
SETS: tuple[str, ...] = ("train", "inference_server", "inference_device")


class Kernel(BaseModel):
    """One DeepBench kernel. Subclasses add DeepBench's fields, in DeepBench's order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    FIELDS: ClassVar[tuple[str, ...]] = ()
    # Directions timed separately, in report order (their sum is the kernel's total time).
    DIRECTIONS: ClassVar[tuple[str, ...]] = ("fwd",)

    op: str
    set: SetName
    index: int = Field(ge=0, description="position in DeepBench's list for this op and set")
    application: str | None = None
    count: int | None = Field(None, ge=1, description="model suites: calls of this shape per forward pass")

    @property
    def id(self) -> str:
        """Stable identity across runs: op/set/index (DeepBench's order never changes)."""
        return f"{self.op}/{self.set}/{self.index:03d}"

    def params(self) -> dict:
        """DeepBench's parameters, by DeepBench's field names, in order."""
        return {f: getattr(self, f) for f in self.FIELDS}

    def listing(self) -> dict:
        """What `deepbench list --format json` prints: op, set, then DeepBench's fields."""
        return {"op": self.op, "set": self.set, **self.params()}

    def label(self) -> str:
        return " ".join(f"{k}={_short(v)}" for k, v in self.params().items())

    def flops(self, direction: str = "fwd") -> float:
        raise NotImplementedError

    def min_bytes(self, direction: str, precision: Precision) -> float:
        raise NotImplementedError


def _short(value: object) -> str:
    if isinstance(value, bool):
        return "T" if value else "N"
    return str(value)


class GemmKernel(Kernel):
    """C (m x n) = op(A) op(B), column-major, as DeepBench hands it to the library."""

    FIELDS: ClassVar[tuple[str, ...]] = ("m", "n", "k", "a_t", "b_t")
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
    op: Literal["rnn"] = "rnn"
    hidden: int = Field(gt=0)
    batch: int = Field(gt=0)
    timesteps: int = Field(gt=0)
    cell: Literal["vanilla", "lstm", "gru"]

    def flops(self, direction: str = "fwd", input_projection: bool = False) -> float:
        return costs.rnn_flops(direction, self.cell, self.hidden, self.batch, self.timesteps, input_projection)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return costs.rnn_bytes(direction, self.cell, self.hidden, self.batch, self.timesteps, INPUT_BYTES[precision])


class SparseGemmKernel(Kernel):
    """Sparse A (m x k, `sparsity` of its entries zero) times dense B (k x n)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("m", "n", "k", "a_t", "b_t", "sparsity")
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


class AllReduceKernel(Kernel):
    """Sum-all-reduce of `floats` float32 elements; DeepBench repeated it `repeat` times."""

    FIELDS: ClassVar[tuple[str, ...]] = ("floats", "repeat")
    op: Literal["all_reduce"] = "all_reduce"
    floats: int = Field(gt=0)
    repeat: int = Field(gt=0)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return costs.all_reduce_bytes(self.floats)


# Layer benchmarks (kernels/layers.py) subclass Kernel above; kernels/__init__.py imports this module first.
from .layers import LAYER_KERNELS  # noqa: E402
from .model_kernel import ModelKernel  # noqa: E402 - the whole-model run (kernels/model_kernel.py)

if TYPE_CHECKING:  # the union is built from LAYER_KERNELS at run time; to a type checker, any kernel is a Kernel
    AnyKernel = Kernel
else:
    _KERNEL_TYPES = (GemmKernel, ConvKernel, RnnKernel, SparseGemmKernel, AllReduceKernel, *LAYER_KERNELS, ModelKernel)
    # Union[tuple] is the union of the tuple's types; ruff's UP007 fix would drop the Union, not spell it X | Y.
    AnyKernel = Annotated[Union[_KERNEL_TYPES], Field(discriminator="op")]  # noqa: UP007
KERNEL_ADAPTER: TypeAdapter = TypeAdapter(AnyKernel)
KERNEL_CLASSES: dict[str, type[Kernel]] = {
    "gemm": GemmKernel, "conv": ConvKernel, "rnn": RnnKernel, "sparse_gemm": SparseGemmKernel,
    "all_reduce": AllReduceKernel, **{cls.model_fields["op"].default: cls for cls in LAYER_KERNELS},
    "model": ModelKernel,
}


def _data(name: str) -> dict:
    return json.loads((resources.files(__package__) / "data" / name).read_text())


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
