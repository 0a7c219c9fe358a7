"""Operator extraction without weights: run a model once on the meta device and record every
aten operator the dispatcher sees, with its shapes, into an OperatorDataset.

How: a TorchDispatchMode under `torch.inference_mode()`. In inference mode the mode sees the
layer-level composite operators (aten.linear, aten.conv2d, aten.layer_norm,
aten.scaled_dot_product_attention, aten.lstm ...) before they are decomposed, which is the
granularity of a layer benchmark and of OpBench's operator types; the decomposed names
(addmm, convolution, native_layer_norm ...) are mapped too, so a torch that decomposes earlier
still yields the same types. Tensors on the meta device have shapes and no storage: ResNet-50
or a Llama layer costs milliseconds and no memory.

Operators that only change metadata (views, transposes) or create constants (arange, zeros),
and dropout in eval mode, are not work and are left out.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..costs import FLOAT32_BYTES, FLOPS_PER_MAC, GATES
from . import IMAGE_SIZE, MODELS, ModelInfo
from .dataset import Operator, OperatorDataset, OpType

TYPE_OF: dict[str, OpType] = {
    **dict.fromkeys(("linear", "mm", "addmm", "bmm", "baddbmm", "matmul"), "gemm"),
    **dict.fromkeys(("conv1d", "conv2d", "conv3d", "convolution", "_convolution"), "conv"),
    **dict.fromkeys(
        (
            "scaled_dot_product_attention",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
        ),
        "attention",
    ),
    **dict.fromkeys(("lstm", "gru", "rnn_tanh", "rnn_relu"), "rnn"),
    **dict.fromkeys(
        (
            "max_pool2d",
            "max_pool2d_with_indices",
            "avg_pool2d",
            "adaptive_avg_pool2d",
            "_adaptive_avg_pool2d",
            "adaptive_max_pool2d",
        ),
        "pooling",
    ),
    **dict.fromkeys(("batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training"), "batch_norm"),
    **dict.fromkeys(("layer_norm", "native_layer_norm"), "layer_norm"),
    **dict.fromkeys(("rms_norm", "_fused_rms_norm"), "rms_norm"),
    **dict.fromkeys(("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"), "softmax"),
    **dict.fromkeys(
        (
            "relu",
            "relu_",
            "gelu",
            "gelu_",
            "silu",
            "silu_",
            "sigmoid",
            "sigmoid_",
            "tanh",
            "tanh_",
            "hardtanh",
            "hardtanh_",
            "leaky_relu",
            "leaky_relu_",
        ),
        "activation",
    ),
    **dict.fromkeys(("embedding",), "embedding"),
    **dict.fromkeys(("add", "add_", "mul", "mul_"), "elementwise"),
}

# Not work: metadata-only views, constant creation, and identity operators.
IGNORED = frozenset(
    (
        "view",
        "_unsafe_view",
        "reshape",
        "t",
        "transpose",
        "permute",
        "expand",
        "unsqueeze",
        "squeeze",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "flatten",
        "alias",
        "detach",
        "as_strided",
        "unflatten",
        "lift_fresh",
        "empty",
        "empty_like",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "arange",
        "scalar_tensor",
        "randn",
        "rand",
        "_to_copy",
        "to",
        "identity",
    )
)
IDENTITY_IN_EVAL = frozenset(("dropout", "feature_dropout", "alpha_dropout"))


class Capture(TorchDispatchMode):
    """Records (aten name, normalised arguments, output) for every operator dispatched."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, dict[str, Any], Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.calls.append((func, _bind(func, args, kwargs or {}), out))
        return out


def _bind(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Arguments by schema name, defaults filled in (conv2d(x, w) has stride 1, padding 0 ...)."""
    bound = {}
    for i, arg in enumerate(func._schema.arguments):
        if i < len(args):
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    v = tuple(int(x) for x in value)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


# --- per-type parameters and FLOPs -----------------------------------------------------------


def _gemm(name: str, a: dict[str, Any]) -> tuple[dict, float]:
    """Parameters as the BLAS receives the problem, column-major (DeepBench's view): PyTorch's
    row-major out (M x N) = x (M x K) @ W is the column-major C (N x M); a_t/b_t say whether the
    library reads the operand transposed (for aten.linear, W is (out, in): always a_t=T, b_t=N)."""
    if name == "linear":
        x, w = a["input"], a["weight"]
        tokens = math.prod(_shape(x)[:-1])
        p = dict(m=int(w.shape[0]), n=tokens, k=int(w.shape[1]), a_t=True, b_t=False, batch=1)
    elif name == "matmul" and a["other"].dim() <= 2 <= a["self"].dim():
        x, w = a["self"], a["other"]  # (..., K) @ (K, N): one GEMM over all leading rows
        cols = int(w.shape[-1]) if w.dim() == 2 else 1
        p = dict(
            m=cols,
            n=math.prod(_shape(x)[:-1]),
            k=int(x.shape[-1]),
            a_t=w.dim() == 2 and w.stride(-1) != 1,
            b_t=x.stride(-1) != 1,
            batch=1,
        )
    else:
        left, right = (
            (a["mat1"], a["mat2"])
            if name == "addmm"
            else (a["batch1"], a["batch2"])
            if name == "baddbmm"
            else (a["self"], a["other"])
            if name == "matmul"
            else (a["self"], a["mat2"])
        )
        batch = math.prod(torch.broadcast_shapes(_shape(left)[:-2], _shape(right)[:-2]))
        rows, inner = int(left.shape[-2]), int(left.shape[-1])
        cols = int(right.shape[-1])
        # the library's A is PyTorch's right operand: row-major (K x N) is column-major (N x K), not transposed
        p = dict(m=cols, n=rows, k=inner, a_t=right.stride(-1) != 1, b_t=left.stride(-1) != 1, batch=batch)
    return p, float(FLOPS_PER_MAC) * p["batch"] * p["m"] * p["n"] * p["k"]


def _conv(a: dict[str, Any]) -> tuple[dict, float]:
    x, w = a["input"], a["weight"]
    if x.dim() != 4:
        raise NotImplementedError(f"{x.dim() - 2}-D convolution")
    n, c, h, wd = _shape(x)
    k, c_per_group, r, s = _shape(w)
    padding = a.get("padding", 0)
    if isinstance(padding, str):  # "same"/"valid": resolved from the output size below
        padding = (r // 2, s // 2) if padding == "same" else (0, 0)
    pad_h, pad_w = _pair(padding)
    stride_h, stride_w = _pair(a.get("stride", 1))
    dil_h, dil_w = _pair(a.get("dilation", 1))
    groups = int(a.get("groups", 1))
    out_h = (h + 2 * pad_h - dil_h * (r - 1) - 1) // stride_h + 1
    out_w = (wd + 2 * pad_w - dil_w * (s - 1) - 1) // stride_w + 1
    p = dict(
        n=n,
        c=c,
        h=h,
        w=wd,
        k=k,
        r=r,
        s=s,
        pad_h=pad_h,
        pad_w=pad_w,
        stride_h=stride_h,
        stride_w=stride_w,
        dilation_h=dil_h,
        dilation_w=dil_w,
        groups=groups,
        out_h=out_h,
        out_w=out_w,
    )
    return p, float(FLOPS_PER_MAC) * n * k * out_h * out_w * c_per_group * r * s


def _attention(a: dict[str, Any]) -> tuple[dict, float]:
    q, k = a["query"], a["key"]
    *lead, s_q, d = _shape(q)
    kv_heads, s_kv = int(k.shape[-3]) if k.dim() >= 3 else 1, int(k.shape[-2])
    batch = int(lead[0]) if len(lead) == 2 else 1
    heads = int(lead[-1]) if lead else 1
    p = dict(
        batch=batch,
        heads=heads,
        kv_heads=kv_heads,
        seq_q=s_q,
        seq_kv=s_kv,
        head_dim=d,
        causal=bool(a.get("is_causal", False)),
        mask=a.get("attn_mask") is not None,
    )
    # QK^T and PV: two GEMMs of s_q x s_kv x d per head (torch.utils.flop_counter's count)
    return p, 2.0 * FLOPS_PER_MAC * batch * heads * s_q * s_kv * d


def _rnn(name: str, a: dict[str, Any]) -> tuple[dict, float]:
    x, weights = a["input"], _tensors(a["params"])
    batch_first, bidirectional = bool(a["batch_first"]), bool(a["bidirectional"])
    steps, batch = (_shape(x)[1], _shape(x)[0]) if batch_first else (_shape(x)[0], _shape(x)[1])
    cell = {"lstm": "lstm", "gru": "gru"}.get(name, "vanilla")
    gates = GATES[cell]
    hidden = int(weights[1].shape[1])  # w_hh: (gates*hidden, hidden)
    layers, directions = int(a["num_layers"]), 2 if bidirectional else 1
    p = dict(
        cell=cell,
        input_size=int(x.shape[-1]),
        hidden=hidden,
        layers=layers,
        bidirectional=bidirectional,
        batch=batch,
        timesteps=steps,
        activation="tanh" if name == "rnn_tanh" else None,
    )
    macs = 0
    for layer in range(layers):
        inp = int(x.shape[-1]) if layer == 0 else hidden * directions
        macs += directions * gates * hidden * (inp + hidden) * batch * steps
    return p, float(FLOPS_PER_MAC) * macs


def _operator(func: Any, a: dict[str, Any], out: Any) -> Operator | None:
    name = func._schema.name.split("::")[-1]
    if name in IGNORED or (name in IDENTITY_IN_EVAL and not a.get("train", False)):
        return None
    op_type = TYPE_OF.get(name, "other")
    params: dict[str, Any] = {}
    flops = 0.0
    if op_type == "gemm":
        params, flops = _gemm(name, a)
    elif op_type == "conv":
        params, flops = _conv(a)
    elif op_type == "attention":
        params, flops = _attention(a)
    elif op_type == "rnn":
        params, flops = _rnn(name, a)
    elif op_type == "pooling":
        params = {
            k: (tuple(v) if isinstance(v, (list, tuple)) else v)
            for k, v in a.items()
            if k in ("kernel_size", "stride", "padding", "output_size", "ceil_mode", "count_include_pad")
        }
    elif op_type == "batch_norm":
        params = {"channels": int(a["input"].shape[1])}
    elif op_type == "embedding":
        params = {
            "vocab": int(a["weight"].shape[0]),
            "dim": int(a["weight"].shape[1]),
            "lookups": int(a["indices"].numel()),
        }
    elif op_type in ("layer_norm", "rms_norm"):
        params = {"normalized": tuple(int(d) for d in a["normalized_shape"])}
    elif op_type == "softmax":
        params = {"dim": int(a["dim"])}
    elif op_type == "elementwise":
        params = {"function": name.rstrip("_")}
    elif op_type == "activation":
        params = {"function": name.rstrip("_"), **({"approximate": a["approximate"]} if "approximate" in a else {})}
    inputs = tuple(_shape(t) for v in a.values() for t in _tensors(v))
    outs = _tensors(out)
    moved = sum(math.prod(s) for s in inputs) + sum(math.prod(_shape(t)) for t in outs[:1])
    return Operator(
        type=op_type,
        aten=str(func),
        params=params,
        inputs=inputs,
        output=_shape(outs[0]) if outs else (),
        count=1,
        flops=flops,
        bytes=float(moved * FLOAT32_BYTES),
    )


def capture(model: torch.nn.Module, example: torch.Tensor) -> list[Operator]:
    """Every operator of model(example), distinct ones merged with their counts, in first-call order."""
    model.eval()
    mode = Capture()
    with torch.inference_mode(), mode:
        model(example)
    merged: OrderedDict[str, Operator] = OrderedDict()
    for func, a, out in mode.calls:
        op = _operator(func, a, out)
        if op is None:
            continue
        key = op.model_dump_json(exclude={"count"})
        prior = merged.get(key)
        merged[key] = op if prior is None else prior.model_copy(update={"count": prior.count + 1})
    return list(merged.values())


def example_input(info: ModelInfo, batch: int, seq: int | None) -> torch.Tensor:
    if info.input == "image":
        return torch.empty(batch, 3, IMAGE_SIZE, IMAGE_SIZE, device="meta")
    assert seq is not None, "extract() resolves the sequence length of token and hidden-state inputs"
    if info.input == "tokens":
        return torch.zeros(batch, seq, dtype=torch.long, device="meta")
    from .language import LlamaConfig

    return torch.empty(batch, seq, LlamaConfig().hidden, device="meta")


def extract(
    name: str, batch: int = 1, seq: int | None = None, build: Callable[[], torch.nn.Module] | None = None
) -> OperatorDataset:
    """The operator dataset of registered model `name` at this batch (and sequence length)."""
    info = MODELS[name]
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    if info.input == "image":
        seq = None
    else:
        seq = seq or info.default_seq
        if seq is None or seq < 1:
            raise ValueError(f"sequence length must be at least 1, not {seq}")
    with torch.device("meta"):
        model = (build or info.build())()
    example = example_input(info, batch, seq)
    operators = capture(model, example)
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    return OperatorDataset(
        model=name,
        source=info.source,
        batch=batch,
        seq=seq,
        input_shape=_shape(example),
        parameters=params,
        torch_version=torch.__version__,
        operators=tuple(operators),
    )
