"""An operator dataset as a suite: each distinct shape once, as the kernel type that runs it.

GEMMs become GemmKernels (DeepBench's column-major m, n, k, a_t, b_t, as the BLAS receives the
problem from PyTorch; bmm and batched matmul BatchedGemmKernels), binary add/mul
ElementwiseKernels, convolutions ConvKernels and recurrent layers RnnKernels; the kernels
carry set "model", the model's name as application and the calls per forward pass as count, so a
report can weight each kernel's time by how often the model runs it. Operators with no kernel
type yet are returned with the reason, never dropped silently. Needs no torch when given a
dataset file; a registered model name is extracted on the spot (which needs torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypedDict

from ..catalog import ConvKernel, GemmKernel, Kernel, RnnKernel
from ..layers import (
    ActivationKernel,
    AttentionKernel,
    BatchedGemmKernel,
    BatchNormKernel,
    ElementwiseKernel,
    EmbeddingKernel,
    NormKernel,
    PoolingKernel,
    SoftmaxKernel,
)
from .dataset import Operator, OperatorDataset
from .params import (
    AttentionParams,
    ConvParams,
    EmbeddingParams,
    FunctionParams,
    GemmParams,
    NormParams,
    PoolingParams,
    RnnParams,
    SoftmaxParams,
    params_as,
)

MODEL_SET: Final = "model"
SUITE_PREFIX = "model:"


class _Common(TypedDict):
    """The fields every kernel of a model's suite shares (index and count are set once all are known)."""

    set: Literal["model"]
    index: int
    application: str


@dataclass(frozen=True)
class Unmapped:
    operator: Operator
    reason: str


def kernel_for(op: Operator, model: str) -> Kernel | str:
    """The kernel that runs `op` (index and count filled in later), or why there is none."""
    common = _Common(set=MODEL_SET, index=0, application=model)
    if op.type == "gemm":
        g = params_as(op.params, GemmParams)
        if g["batch"] != 1:
            return BatchedGemmKernel(
                batch=g["batch"], m=g["m"], n=g["n"], k=g["k"], a_t=g["a_t"], b_t=g["b_t"], **common
            )
        return GemmKernel(m=g["m"], n=g["n"], k=g["k"], a_t=g["a_t"], b_t=g["b_t"], **common)
    if op.type == "conv":
        c = params_as(op.params, ConvParams)
        if c["groups"] != 1 or c["dilation_h"] != 1 or c["dilation_w"] != 1:
            return "grouped or dilated convolution has no kernel type yet"
        return ConvKernel(
            w=c["w"],
            h=c["h"],
            c=c["c"],
            n=c["n"],
            k=c["k"],
            s=c["s"],
            r=c["r"],
            pad_w=c["pad_w"],
            pad_h=c["pad_h"],
            stride_w=c["stride_w"],
            stride_h=c["stride_h"],
            **common,
        )
    if op.type == "rnn":
        r = params_as(op.params, RnnParams)
        if r["bidirectional"] or r["input_size"] != r["hidden"] or r["activation"] == "tanh":
            return "RnnKernel covers unidirectional layers with input size = hidden (ReLU for vanilla)"
        return RnnKernel(hidden=r["hidden"], batch=r["batch"], timesteps=r["timesteps"], cell=r["cell"], **common)
    return _layer_kernel(op, common)


ActivationFunction = Literal["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"]
# (aten function, GELU's approximation) -> ActivationKernel's function
ACTIVATION_KERNELS: dict[tuple[str, str | None], ActivationFunction] = {
    ("relu", None): "relu",
    ("gelu", "none"): "gelu",
    ("gelu", "tanh"): "gelu_tanh",
    ("silu", None): "silu",
    ("tanh", None): "tanh",
    ("sigmoid", None): "sigmoid",
}


def _layer_kernel(op: Operator, common: _Common) -> Kernel | str:
    """The layer benchmarks (kernels/layers.py) for pooling, norms, softmax, activations,
    embedding and attention; the reason where a variant is not covered."""
    x = op.inputs[0] if op.inputs else ()
    if op.type == "pooling":
        return _pooling(op, common)
    if op.type == "batch_norm":
        if len(x) != 4:
            return "BatchNormKernel covers 2-D (NCHW) batch normalization"
        return BatchNormKernel(n=x[0], c=x[1], h=x[2], w=x[3], **common)
    if op.type in ("layer_norm", "rms_norm"):
        cols = math.prod(params_as(op.params, NormParams)["normalized"])
        return NormKernel(
            kind="layer" if op.type == "layer_norm" else "rms", rows=math.prod(x) // cols, cols=cols, **common
        )
    if op.type == "softmax":
        if params_as(op.params, SoftmaxParams)["dim"] not in (-1, len(x) - 1):
            return "SoftmaxKernel covers softmax over the last dimension"
        return SoftmaxKernel(rows=math.prod(x[:-1]), cols=x[-1], **common)
    if op.type == "activation":
        a = params_as(op.params, FunctionParams)
        function = ACTIVATION_KERNELS.get((a["function"], a.get("approximate")))
        if function is None:
            return f"no activation kernel for {a['function']} yet"
        return ActivationKernel(function=function, elements=math.prod(x), **common)
    if op.type == "embedding":
        e = params_as(op.params, EmbeddingParams)
        return EmbeddingKernel(vocab=e["vocab"], dim=e["dim"], lookups=e["lookups"], **common)
    if op.type == "attention":
        t = params_as(op.params, AttentionParams)
        if t["mask"]:
            return "AttentionKernel covers causal or unmasked attention, not an explicit mask"
        return AttentionKernel(
            batch=t["batch"],
            heads=t["heads"],
            kv_heads=t["kv_heads"],
            seq_q=t["seq_q"],
            seq_kv=t["seq_kv"],
            head_dim=t["head_dim"],
            causal=t["causal"],
            **common,
        )
    if op.type == "elementwise":
        return _elementwise(op, common)
    return "element-wise operators other than binary add and mul, and data movement, have no kernel type yet"


# aten function -> ElementwiseKernel's function (binary add and mul only)
ELEMENTWISE_KERNELS: dict[str, Literal["add", "mul"]] = {"add": "add", "mul": "mul"}


def _elementwise(op: Operator, common: _Common) -> Kernel | str:
    """Binary add/mul; a Python number as the second operand counts as one element (a scalar)."""
    elements = math.prod(op.output)
    sizes = [math.prod(shape) for shape in op.inputs[:2]] + [1]
    function = ELEMENTWISE_KERNELS.get(params_as(op.params, FunctionParams).get("function", ""))
    if len(op.inputs) > 2 or any(elements % n for n in sizes[:2]) or function is None:
        return "ElementwiseKernel covers binary add and mul whose operands broadcast to the output"
    return ElementwiseKernel(function=function, elements=elements, a_elements=sizes[0], b_elements=sizes[1], **common)


def _pooling(op: Operator, common: _Common) -> Kernel | str:
    p, (n, c, h, w) = params_as(op.params, PoolingParams), op.inputs[0]
    name = op.aten.split(".")[1]
    if "adaptive" in name:
        if tuple(p["output_size"]) != (1, 1) or "max" in name:
            return "adaptive pooling is covered for global average pooling (output 1x1) only"
        return PoolingKernel(
            mode="avg", n=n, c=c, h=h, w=w, r=h, s=w, pad_h=0, pad_w=0, stride_h=h, stride_w=w, **common
        )
    window = _pair(p["kernel_size"])
    stride = _pair(p.get("stride") or p["kernel_size"])  # an empty stride means the window's
    pad = _pair(p.get("padding", 0))
    mode: Literal["max", "avg"] = "max" if "max" in name else "avg"
    if p.get("ceil_mode"):
        return "pooling with ceil_mode has no kernel yet"
    if mode == "avg" and any(pad) and not p.get("count_include_pad", True):
        return "average pooling that excludes padding from the count has no kernel yet"
    return PoolingKernel(
        mode=mode,
        n=n,
        c=c,
        h=h,
        w=w,
        r=window[0],
        s=window[1],
        pad_h=pad[0],
        pad_w=pad[1],
        stride_h=stride[0],
        stride_w=stride[1],
        **common,
    )


def _pair(value: int | tuple[int, ...]) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    v = tuple(int(x) for x in value)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _calls(op: Operator) -> int:
    """Kernel calls per forward pass: a stacked recurrent layer runs its RnnKernel once per layer."""
    return op.count * (params_as(op.params, RnnParams)["layers"] if op.type == "rnn" else 1)


def dataset_kernels(ds: OperatorDataset) -> tuple[list[Kernel], list[Unmapped]]:
    """Distinct kernels in first-call order, indexed per operation, with summed counts."""
    counts: dict[Kernel, int] = {}
    unmapped: list[Unmapped] = []
    for op in ds.operators:
        k = kernel_for(op, ds.model)
        if isinstance(k, str):
            unmapped.append(Unmapped(op, k))
        else:
            counts[k] = counts.get(k, 0) + _calls(op)
    out: list[Kernel] = []
    per_op: dict[str, int] = {}
    for k, n in counts.items():
        index = per_op.get(k.op, 0)
        per_op[k.op] = index + 1
        out.append(k.model_copy(update={"index": index, "count": n}))
    return out, unmapped


def load_dataset(spec: str, batch: int | None = None, seq: int | None = None) -> OperatorDataset:
    """`spec`: a registered model (extracted now, needs torch) or an operator dataset file."""
    from . import MODELS

    if spec in MODELS:
        try:
            from .extract import extract
        except ImportError as exc:
            raise ValueError(
                f"extracting model '{spec}' needs torch here ({exc}); or pass a dataset file "
                f"made by `deepbench models extract` as model:FILE"
            ) from None
        return extract(spec, batch=batch or 1, seq=seq)
    path = Path(spec)
    if not path.is_file():
        raise ValueError(f"unknown model '{spec}' (choose from: {', '.join(MODELS)}, or a dataset file)")
    try:
        ds = OperatorDataset.load(path)
    except ValueError as exc:
        raise ValueError(f"{path} is not an operator dataset: {str(exc).splitlines()[0]}") from None
    for flag, asked, has in (("--batch", batch, ds.batch), ("--seq", seq, ds.seq)):
        if asked is not None and asked != has:
            raise ValueError(f"{path} was extracted with {flag} {has}, not {asked}: extract it again")
    return ds
