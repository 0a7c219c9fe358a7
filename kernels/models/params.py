"""The parameters an operator of each type carries in an operator dataset (Operator.params).

The dataset stores them as a plain mapping, validated only as scalars and integer tuples, so that
files stay readable as new keys appear; these TypedDicts say which keys each type has and what
they hold. kernels/models/extract.py writes them and kernels/models/suite.py reads them through
`params_as`, so both sides are checked against one description.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, TypeVar, cast

from typing_extensions import NotRequired


class GemmParams(TypedDict):
    """DeepBench's column-major m, n, k, a_t, b_t, as the BLAS receives the problem; batch 1: a plain GEMM."""

    m: int
    n: int
    k: int
    a_t: bool
    b_t: bool
    batch: int


class ConvParams(TypedDict):
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    pad_h: int
    pad_w: int
    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    groups: int
    out_h: int
    out_w: int


class RnnParams(TypedDict):
    cell: Literal["vanilla", "lstm", "gru"]
    input_size: int
    hidden: int
    layers: int
    bidirectional: bool
    batch: int
    timesteps: int
    activation: str | None  # "tanh" for a vanilla RNN with tanh, else None


class AttentionParams(TypedDict):
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    causal: bool
    mask: bool  # an explicit attention mask was passed


class PoolingParams(TypedDict, total=False):
    """The pooling call's own arguments, as given (an int or a pair each)."""

    kernel_size: int | tuple[int, ...]
    stride: int | tuple[int, ...]
    padding: int | tuple[int, ...]
    output_size: tuple[int, ...]
    ceil_mode: bool
    count_include_pad: bool


class BatchNormParams(TypedDict):
    channels: int


class NormParams(TypedDict):
    normalized: tuple[int, ...]


class SoftmaxParams(TypedDict):
    dim: int


class EmbeddingParams(TypedDict):
    vocab: int
    dim: int
    lookups: int


class FunctionParams(TypedDict):
    """Activations and binary element-wise operators: the function's name (and GELU's approximation)."""

    function: str
    approximate: NotRequired[str]


P = TypeVar("P")


def params_as(params: Any, kind: type[P]) -> P:
    """`params` read as the TypedDict `kind` of its operator type. A TypedDict is a static
    description only (no check at run time): the caller picks `kind` from the operator's type."""
    return cast(P, params)
