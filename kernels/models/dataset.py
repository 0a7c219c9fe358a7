"""The operator dataset: what a model computes, operator by operator, for one input size.

One record per distinct operator (aten op + shapes + parameters) with how many times one forward
pass calls it, so a suite runs each distinct shape once and a report weights its time by the
count (OpBench's operator-level view). Needs no torch: the host side reads and validates these
files with the same model that wrote them.

FLOPs follow kernels/costs.py (a multiply-add is 2 FLOPs) and count the matrix work only: GEMMs,
convolutions, attention (QK^T and PV, 4*b*h*s_q*s_kv*d, not halved for a causal mask, as
torch.utils.flop_counter counts it) and recurrent layers (input and recurrent projections).
Memory-bound operators (norms, softmax, activations, pooling, embedding, element-wise) carry 0
FLOPs and their fewest bytes instead, so FLOP totals compare with published MAC counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

DATASET_SCHEMA: Final = "deepbench.operators/1"

# Operator types, in report order. `elementwise`: binary add and mul (residual adds, RoPE's
# products, SwiGLU's gate); `other` keeps the rest of element-wise, reductions and data movement
# (concatenation, negation, sin/cos) under their aten names.
OpType = Literal[
    "gemm",
    "conv",
    "attention",
    "rnn",
    "pooling",
    "batch_norm",
    "layer_norm",
    "rms_norm",
    "softmax",
    "activation",
    "embedding",
    "elementwise",
    "other",
]
OP_TYPES: tuple[str, ...] = OpType.__args__  # type: ignore[attr-defined]

Param = int | float | bool | str | None


class Operator(BaseModel):
    """One distinct operator of a model's forward pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: OpType
    aten: str = Field(description="the aten operator as dispatched, e.g. aten.conv2d.default")
    params: dict[str, Param | tuple[int, ...]] = Field(
        default_factory=dict, description="the shape parameters that define the work, by name (per type)"
    )
    inputs: tuple[tuple[int, ...], ...] = Field(description="shapes of the tensor arguments, in order")
    output: tuple[int, ...] = Field(description="shape of the (first) output")
    count: int = Field(ge=1, description="calls per forward pass")
    flops: float = Field(ge=0, description="FLOPs per call (matrix work only; see the module docstring)")
    bytes: float = Field(ge=0, description="fewest bytes per call at float32: inputs read once, output written once")

    @property
    def total_flops(self) -> float:
        return self.flops * self.count


class OperatorDataset(BaseModel):
    """Every distinct operator of one model at one input size, in first-call order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal["deepbench.operators/1"] = DATASET_SCHEMA
    model: str
    source: str = Field(description="where the model definition comes from (paper, configuration)")
    batch: int = Field(ge=1)
    seq: int | None = Field(None, description="sequence length for language models")
    input_shape: tuple[int, ...]
    dtype: str = "float32"
    parameters: int = Field(ge=0, description="the model's parameter count (shared weights once)")
    torch_version: str
    operators: tuple[Operator, ...]

    def total_flops(self, op_type: str | None = None) -> float:
        return sum(o.total_flops for o in self.operators if op_type is None or o.type == op_type)

    def calls(self, op_type: str | None = None) -> int:
        return sum(o.count for o in self.operators if op_type is None or o.type == op_type)

    def of_type(self, op_type: str) -> list[Operator]:
        return [o for o in self.operators if o.type == op_type]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> OperatorDataset:
        return cls.model_validate_json(path.read_text())
