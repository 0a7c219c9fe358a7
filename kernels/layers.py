"""Layer benchmarks beyond DeepBench's operations (AI Matrix's layer set; OpBench's operator
types): pooling, batch and layer/RMS normalization, softmax, activations, embedding,
scaled dot-product attention, binary element-wise operations and batched GEMM. Forward only
(inference), NCHW for images.

Costs follow kernels/costs.py: FLOPs count multiply-adds as 2 and only matrix work (attention's
QK^T and PV); the memory-bound layers report 0 FLOPs and are judged by bytes (GB/s): each input
read once and each output written once at the precision's element size. Shapes come from the
model datasets (kernels/models), set "model", and from AI Matrix's layer lists (suite `layers`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from . import costs
from .kernel import Kernel
from .op_traits import OpTraits
from .precision import INPUT_BYTES, OUTPUT_BYTES, Precision

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid")


def _io_bytes(inputs: int, outputs: int, precision: Precision, params: int = 0) -> float:
    return (inputs + params) * INPUT_BYTES[precision] + outputs * OUTPUT_BYTES[precision]


class PoolingKernel(Kernel):
    """2-D max or average pooling (count_include_pad); global average pooling is avg with the
    window = the whole map."""

    FIELDS: ClassVar[tuple[str, ...]] = ("mode", "n", "c", "h", "w", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Pooling")
    op: Literal["pooling"] = "pooling"
    mode: Literal["max", "avg"]
    n: int = Field(gt=0)
    c: int = Field(gt=0)
    h: int = Field(gt=0)
    w: int = Field(gt=0)
    r: int = Field(gt=0)
    s: int = Field(gt=0)
    pad_h: int = Field(ge=0)
    pad_w: int = Field(ge=0)
    stride_h: int = Field(gt=0)
    stride_w: int = Field(gt=0)

    @property
    def out_h(self) -> int:
        return costs.conv_output_size(self.h, self.r, self.pad_h, self.stride_h)

    @property
    def out_w(self) -> int:
        return costs.conv_output_size(self.w, self.s, self.pad_w, self.stride_w)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return _io_bytes(self.n * self.c * self.h * self.w, self.n * self.c * self.out_h * self.out_w, precision)


class BatchNormKernel(Kernel):
    """Inference batch normalization with running statistics (scale, shift per channel)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("n", "c", "h", "w")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Batch normalization (inference)")
    op: Literal["batch_norm"] = "batch_norm"
    n: int = Field(gt=0)
    c: int = Field(gt=0)
    h: int = Field(gt=0)
    w: int = Field(gt=0)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        x = self.n * self.c * self.h * self.w
        return _io_bytes(x, x, precision, params=4 * self.c)


class NormKernel(Kernel):
    """LayerNorm (mean and variance) or RMSNorm over the last `cols` elements of `rows` rows."""

    FIELDS: ClassVar[tuple[str, ...]] = ("kind", "rows", "cols")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Layer / RMS normalization")
    op: Literal["norm"] = "norm"
    kind: Literal["layer", "rms"]
    rows: int = Field(gt=0)
    cols: int = Field(gt=0)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        x = self.rows * self.cols
        return _io_bytes(x, x, precision, params=(2 if self.kind == "layer" else 1) * self.cols)


class SoftmaxKernel(Kernel):
    """Softmax over the last dimension (`cols`) of `rows` rows."""

    FIELDS: ClassVar[tuple[str, ...]] = ("rows", "cols")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Softmax")
    op: Literal["softmax"] = "softmax"
    rows: int = Field(gt=0)
    cols: int = Field(gt=0)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return _io_bytes(self.rows * self.cols, self.rows * self.cols, precision)


class ActivationKernel(Kernel):
    """An element-wise activation over `elements` values (gelu_tanh: GELU's tanh approximation)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("function", "elements")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Activations")
    op: Literal["activation"] = "activation"
    function: Literal["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"]
    elements: int = Field(gt=0)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return _io_bytes(self.elements, self.elements, precision)


class EmbeddingKernel(Kernel):
    """A table lookup: `lookups` rows of `dim` values gathered from a `vocab` x `dim` table."""

    FIELDS: ClassVar[tuple[str, ...]] = ("vocab", "dim", "lookups")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Embedding lookup")
    op: Literal["embedding"] = "embedding"
    vocab: int = Field(gt=0)
    dim: int = Field(gt=0)
    lookups: int = Field(gt=0)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        rows = self.lookups * self.dim  # only the rows looked up must be read (plus int64 indices)
        return _io_bytes(rows, rows, precision) + self.lookups * 8


class AttentionKernel(Kernel):
    """softmax(Q K^T / sqrt(d) [+ causal mask]) V for `heads` query heads sharing `kv_heads`
    key/value heads (grouped-query attention when fewer), as F.scaled_dot_product_attention."""

    FIELDS: ClassVar[tuple[str, ...]] = ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "head_dim", "causal")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Scaled dot-product attention")
    op: Literal["attention"] = "attention"
    batch: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    seq_q: int = Field(gt=0)
    seq_kv: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    causal: bool

    def flops(self, direction: str = "fwd") -> float:
        """QK^T and PV; not halved for a causal mask (torch.utils.flop_counter's convention)."""
        return 2.0 * costs.FLOPS_PER_MAC * self.batch * self.heads * self.seq_q * self.seq_kv * self.head_dim

    def min_bytes(self, direction: str, precision: Precision) -> float:
        q = self.batch * self.heads * self.seq_q * self.head_dim
        kv = 2 * self.batch * self.kv_heads * self.seq_kv * self.head_dim
        return _io_bytes(q + kv, q, precision)


ELEMENTWISE_FUNCTIONS = ("add", "mul")


class ElementwiseKernel(Kernel):
    """A binary element-wise operation out = a (+ or *) b over `elements` output values.

    Broadcasting is described by element counts only: `a_elements` and `b_elements` each divide
    `elements`, and a smaller operand is repeated along the output's leading dimensions (a bias
    of the last dimension, RoPE's (seq, head_dim) table over (batch, heads); 1 = a scalar). A
    residual add has a = b = elements. Memory-bound like the other layers: 0 FLOPs, judged by
    bytes (each input read once, the output written once)."""

    FIELDS: ClassVar[tuple[str, ...]] = ("function", "elements", "a_elements", "b_elements")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Element-wise (binary)")
    op: Literal["elementwise"] = "elementwise"
    function: Literal["add", "mul"]
    elements: int = Field(gt=0)
    a_elements: int = Field(gt=0)
    b_elements: int = Field(gt=0)

    @model_validator(mode="after")
    def _broadcasts(self) -> ElementwiseKernel:
        for name, n in (("a_elements", self.a_elements), ("b_elements", self.b_elements)):
            if self.elements % n:
                raise ValueError(f"{name}={n} does not divide elements={self.elements} (no broadcast)")
        return self

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return _io_bytes(self.a_elements + self.b_elements, self.elements, precision)

    def layout(self) -> tuple[tuple[int, int], tuple[int, ...], tuple[int, ...]]:
        """Shapes every backend lays out: the output (rows, cols) with cols the smaller operand's
        size, an operand of the output's size (rows, cols), the smaller one (cols,) broadcast over
        the rows. ValueError for a pattern where neither operand is the output's size."""
        cols = min(self.a_elements, self.b_elements)
        if max(self.a_elements, self.b_elements) != self.elements:
            raise ValueError(
                f"operands of {self.a_elements} and {self.b_elements} elements broadcast to "
                f"{self.elements} in a pattern no backend lays out "
                "(one operand must be the output's size)"
            )
        rows = self.elements // cols
        a, b = ((rows, cols) if n == self.elements else (cols,) for n in (self.a_elements, self.b_elements))
        return (rows, cols), a, b


class BatchedGemmKernel(Kernel):
    """`batch` independent GEMMs of one shape, each DeepBench's column-major C (m x n) =
    op(A) op(B) (strided-batched: cublasGemmStridedBatched, MKL's batch GEMM via torch.bmm);
    attention written as bmm-softmax-bmm and grouped projections use it."""

    FIELDS: ClassVar[tuple[str, ...]] = ("batch", "m", "n", "k", "a_t", "b_t")
    TRAITS: ClassVar[OpTraits | None] = OpTraits("Batched matrix multiplication")
    op: Literal["batched_gemm"] = "batched_gemm"
    batch: int = Field(gt=0)
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    a_t: bool
    b_t: bool

    def flops(self, direction: str = "fwd") -> float:
        return self.batch * costs.gemm_flops(self.m, self.n, self.k)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return self.batch * costs.gemm_bytes(self.m, self.n, self.k, INPUT_BYTES[precision], OUTPUT_BYTES[precision])


LAYER_KERNELS: tuple[type[Kernel], ...] = (
    PoolingKernel,
    BatchNormKernel,
    NormKernel,
    SoftmaxKernel,
    ActivationKernel,
    EmbeddingKernel,
    AttentionKernel,
    ElementwiseKernel,
    BatchedGemmKernel,
)
LAYER_OPS: tuple[str, ...] = tuple(cls.model_fields["op"].default for cls in LAYER_KERNELS)
LAYER_TITLES: dict[str, str] = {
    cls.model_fields["op"].default: cls.TRAITS.title for cls in LAYER_KERNELS if cls.TRAITS is not None
}
