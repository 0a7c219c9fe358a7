"""DeepBench's 629 kernels as typed models, one class per operation, in DeepBench's order.

The data files in `data/` are DeepBench's `*_problems.h` lists (see data/README.md); each kernel
knows its position in its set, the application it came from (where DeepBench's kernel
workbooks name one), its FLOP count and the fewest bytes it must move (formulas in `costs`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Annotated, ClassVar, Literal, Union

from pydantic import Field, TypeAdapter

from . import costs
from .kernel import Kernel
from .layers import LAYER_KERNELS
from .model_kernel import ModelKernel
from .precision import INPUT_BYTES, OUTPUT_BYTES, Precision

OPS: tuple[str, ...] = ("gemm", "conv", "rnn", "sparse_gemm", "all_reduce")
SETS: tuple[str, ...] = ("train", "inference_server", "inference_device")


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


# Layer benchmarks (kernels/layers.py) and the whole-model run (kernels/model_kernel.py) subclass Kernel too.

AnyKernel = Annotated[
    Union[(GemmKernel, ConvKernel, RnnKernel, SparseGemmKernel, AllReduceKernel, *LAYER_KERNELS, ModelKernel)],
    Field(discriminator="op"),
]
KERNEL_ADAPTER: TypeAdapter = TypeAdapter(AnyKernel)
KERNEL_CLASSES: dict[str, type[Kernel]] = {
    "gemm": GemmKernel, "conv": ConvKernel, "rnn": RnnKernel, "sparse_gemm": SparseGemmKernel,
    "all_reduce": AllReduceKernel, **{cls.model_fields["op"].default: cls for cls in LAYER_KERNELS},
    "model": ModelKernel,
}


def _data(name: str) -> dict:
    return json.loads(resources.files(__package__).joinpath("data", name).read_text())


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
