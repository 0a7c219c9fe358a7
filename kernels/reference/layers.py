"""Float64 numpy references for the layer benchmarks (kernels/layers.py), for every backend (the torch
backend hands its tensors over as float64 host arrays, pytorch/layer_common.py `host64`): each layer
written from its definition, never by the runtime under test, so a wrong kernel cannot agree with its
own reference.

Pooling and attention compare a few images / (batch, head) pairs, as the torch backend does;
activations compare at most CHECK_ELEMENTS random elements (GELU's erf has no vectorized numpy
form: math.erf per element)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..precision import Precision
from ..results import Check
from .numpy_checks import compare_points, relative_error, verdict

EPS = 1e-5  # the models' epsilon (torch's default)
VAR_FLOOR = 0.5  # running variances drawn from [0.5, 1.5): positive, never constant
GELU_TANH_COEFF = 0.044715
CHECK_ELEMENTS = 1 << 16
METHOD = "reference-fp64"


def elementwise(function: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b or a * b in float64, numpy broadcasting a smaller operand over the rows."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 + b64 if function == "add" else a64 * b64


def check_images(n: int) -> list[int]:
    """The images (or batch entries) a pooling check covers: the first and the last."""
    return sorted({0, n - 1})


def embedding(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The rows `ids` of `table`, in float64: a gather."""
    return table.astype(np.float64)[ids]


def attention_pairs(batch: int, heads: int) -> list[tuple[int, int]]:
    return sorted({(0, 0), (batch - 1, heads - 1)})


def compare(out: np.ndarray, ref: np.ndarray, precision: Precision, detail: str = "", method: str = METHOD) -> Check:
    return verdict(relative_error(out, ref), precision, method, detail)


def pool_nchw(
    x: np.ndarray,
    mode: str,
    r: int,
    s: int,
    pad_h: int,
    pad_w: int,
    stride_h: int,
    stride_w: int,
    out_h: int,
    out_w: int,
) -> np.ndarray:
    """Max (padding -inf) or average (count_include_pad: padding counts as zeros) pooling."""
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad_h, pad_h), (pad_w, pad_w)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, (r, s), axis=(2, 3))  # n, c, H', W', r, s
    win = win[:, :, ::stride_h, ::stride_w][:, :, :out_h, :out_w]
    return win.max(axis=(-2, -1)) if mode == "max" else win.sum(axis=(-2, -1)) / (r * s)


def batch_norm_nchw(
    x: np.ndarray, mean: np.ndarray, var: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = EPS
) -> np.ndarray:
    per_channel = lambda t: t.astype(np.float64).reshape(1, -1, 1, 1)  # noqa: E731
    return (x.astype(np.float64) - per_channel(mean)) / np.sqrt(per_channel(var) + eps) * per_channel(
        weight
    ) + per_channel(bias)


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = EPS) -> np.ndarray:
    xd = x.astype(np.float64)
    centred = xd - xd.mean(-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps) * weight.astype(np.float64) + bias.astype(
        np.float64
    )


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float = EPS) -> np.ndarray:
    xd = x.astype(np.float64)
    return xd / np.sqrt((xd**2).mean(-1, keepdims=True) + eps) * weight.astype(np.float64)


def softmax(x: np.ndarray) -> np.ndarray:
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_erf = np.frompyfunc(math.erf, 1, 1)

ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64)),
    "gelu_tanh": lambda x: (
        0.5 * x * (1.0 + 2.0 * _sigmoid(2.0 * math.sqrt(2.0 / math.pi) * (x + GELU_TANH_COEFF * x**3)) - 1.0)
    ),
    "silu": lambda x: x * _sigmoid(x),
    "tanh": lambda x: 2.0 * _sigmoid(2.0 * x) - 1.0,
    "sigmoid": _sigmoid,
}


def check_activation(
    function: str, out: np.ndarray, x: np.ndarray, precision: Precision, rng: np.random.Generator
) -> Check:
    """All elements when there are at most CHECK_ELEMENTS, else that many random ones."""
    flat_out, flat_x = out.reshape(-1), x.reshape(-1)
    if flat_x.size <= CHECK_ELEMENTS:
        return compare(flat_out, ACTIVATIONS[function](flat_x.astype(np.float64)), precision)
    idx = rng.choice(flat_x.size, size=CHECK_ELEMENTS, replace=False)
    ref = ACTIVATIONS[function](flat_x[idx].astype(np.float64))
    return compare_points(flat_out[idx].astype(np.float64), ref, precision)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, pairs: list[tuple[int, int]]) -> np.ndarray:
    """softmax(Q K^T / sqrt(d) [+ top-left causal mask]) V for the (batch, head) pairs; query
    head h reads key/value head h // (heads / kv_heads). q (B, H, Sq, D), k and v (B, Hkv, Skv, D)."""
    group = q.shape[1] // k.shape[1]
    seq_q, seq_kv, dim = q.shape[2], k.shape[2], q.shape[3]
    rows = []
    for b, h in pairs:
        qd, kd, vd = (t.astype(np.float64) for t in (q[b, h], k[b, h // group], v[b, h // group]))
        scores = qd @ kd.T / math.sqrt(dim)
        if causal:
            scores = np.where(np.tril(np.ones((seq_q, seq_kv), dtype=bool)), scores, -np.inf)
        rows.append(softmax(scores) @ vd)
    return np.stack(rows)
