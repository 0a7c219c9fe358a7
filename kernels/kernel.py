"""The base of every kernel: what identifies one (operation, set, position) and what each
operation's class must say about itself (its fields, directions, FLOPs and bytes).

It sits apart from the catalog of DeepBench's kernels so that the layer benchmarks
(kernels/layers.py) and the whole-model kernel (kernels/model_kernel.py) can subclass it while
the catalog lists them all: each imports this module, none imports another to get its base.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from .op_traits import OpTraits
from .precision import Precision

# "model": a shape taken from a real model's operator dataset (kernels/models; application = the model)
# "layers": AI Matrix's layer-based benchmark lists (data/ai_matrix.json; suite `layers`)
# "sparse_2of4": DeepBench's sparse GEMM shapes with 2:4 structured sparsity (suite `sparse-2of4`; not DeepBench's)
# "collectives": every collective at DeepBench's all-reduce sizes and nccl-tests' sweep (suite `collectives`)
SetName = Literal["train", "inference_server", "inference_device", "model", "layers", "sparse_2of4", "collectives"]
# DeepBench's inference sets: its benchmarks ran them with `inference` set.
INFERENCE_SETS: tuple[str, ...] = ("inference_server", "inference_device")


class Kernel(BaseModel):
    """One DeepBench kernel. Subclasses add DeepBench's fields, in DeepBench's order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    FIELDS: ClassVar[tuple[str, ...]] = ()
    # Directions timed separately, in report order (their sum is the kernel's total time).
    DIRECTIONS: ClassVar[tuple[str, ...]] = ("fwd",)
    # Whether DeepBench's inference mode timed only this operation's forward pass (conv_bench.cu:
    # `if (!inference)` guards the backward passes), so an inference set times `fwd` alone here too.
    INFERENCE_FORWARD_ONLY: ClassVar[bool] = False
    # What the host needs to know about the operation (kernels/op_traits.py); None: plain traits.
    TRAITS: ClassVar[OpTraits | None] = None

    op: str
    set: SetName
    index: int = Field(ge=0, description="position in DeepBench's list for this op and set")
    application: str | None = None
    count: int | None = Field(None, ge=1, description="model suites: calls of this shape per forward pass")

    @property
    def id(self) -> str:
        """Stable identity across runs: op/set/index (DeepBench's order never changes)."""
        return f"{self.op}/{self.set}/{self.index:03d}"

    @property
    def forward_only(self) -> bool:
        """Whether this kernel times its forward pass only, as DeepBench's inference did (its
        operation's INFERENCE_FORWARD_ONLY, in an inference set)."""
        return self.INFERENCE_FORWARD_ONLY and self.set in INFERENCE_SETS

    def timed(self) -> tuple[str, ...]:
        """The directions DeepBench timed for this kernel, in report order: its DIRECTIONS, or
        `fwd` alone where it is forward only."""
        return self.DIRECTIONS[:1] if self.forward_only else self.DIRECTIONS

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
