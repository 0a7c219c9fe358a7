"""Recurrent layers on onnxruntime's RNN (ReLU), LSTM and GRU operators, forward only, fp32.

What is timed differs from DeepBench's rule, and the result says so: an ONNX recurrent operator
takes the layer's input X and computes the input projection W x_t for every step inside the
operator, so the time includes it and the FLOPs are counted with it
(kernel.flops("fwd", input_projection=True)). The input size is the hidden size, as in DeepBench.
LSTM has no peepholes (P omitted); GRU uses linear_before_reset=1, cuDNN's form, where the reset
gate multiplies (R_h h + Rb_h). Random initial states h0 (and c0): a zero state hides errors
in R. There is no backward: onnxruntime is an inference runtime, and it has no int8 RNN."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from ...catalog import RnnKernel
from ...precision import Precision
from ...reference.numpy_checks import relative_error, verdict
from ...reference.rnn_numpy import Layer
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import OrtContext

OPS = {"vanilla": "RNN", "lstm": "LSTM", "gru": "GRU"}
GATES = {"vanilla": 1, "lstm": 4, "gru": 3}
BACKWARD_REASON = "backward unsupported: onnxruntime is an inference runtime"


# ONNX's gate blocks (its operators' spec: LSTM i, o, f, c; GRU z, r, h) in the reference layer's order
# (reference/rnn_numpy.py GATE_ORDER: LSTM i, f, g, o; GRU u, r, n): the blocks to take, in turn.
REORDER = {"vanilla": (0,), "lstm": (0, 2, 3, 1), "gru": (0, 1, 2)}


def _blocks(a: np.ndarray, cell: str, hid: int) -> np.ndarray:
    """The gate blocks of the last axis (ONNX's order) in the reference layer's order."""
    return np.concatenate([a[..., j * hid : (j + 1) * hid] for j in REORDER[cell]], axis=-1)


def reference(
    cell: str, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray, h0: np.ndarray, c0: np.ndarray
) -> np.ndarray:
    """All hidden states (T, N, H) in float64 (kernels/reference/rnn_numpy.py) from ONNX's tensors: one
    direction's W, R, and the biases Wb and Rb concatenated. The recurrent bias joins the input
    projection, but for the GRU's new gate, where it sits inside the reset gate (linear_before_reset)."""
    hid = r.shape[2]
    w64, r64, b64 = (a[0].astype(np.float64) for a in (w, r, b))
    wb, rb = b64[: b64.shape[0] // 2], b64[b64.shape[0] // 2 :]
    b_n = rb[2 * hid :] if cell == "gru" else None
    inside = rb if b_n is None else np.concatenate([rb[: 2 * hid], np.zeros(hid)])
    proj = _blocks(x.astype(np.float64) @ w64.T + wb + inside, cell, hid)
    layer = Layer(cell, proj, _blocks(r64.T, cell, hid), h0[0].astype(np.float64), c0[0].astype(np.float64), b_n)
    return layer.forward()


def prepare(ctx: OrtContext, kernel: RnnKernel, precision: Precision) -> Prepared:
    if precision is not Precision.FP32:
        raise Unsupported(
            f"onnxruntime's RNN/LSTM/GRU operators run float32 only on the CPU provider; "
            f"no {precision.value} recurrent operator"
        )
    hid, gates, steps, batch = kernel.hidden, GATES[kernel.cell], kernel.timesteps, kernel.batch
    x = ctx.random((steps, batch, hid), precision)
    w = ctx.random((1, gates * hid, hid), precision, scale=hid**-0.5)
    r = ctx.random((1, gates * hid, hid), precision, scale=hid**-0.5)
    b = ctx.random((1, 2 * gates * hid), precision, scale=0.1)
    h0 = ctx.random((1, batch, hid), precision)
    c0 = ctx.random((1, batch, hid), precision)
    y = np.empty((steps, 1, batch, hid), dtype=np.float32)
    attrs: dict[str, Any] = {"hidden_size": hid}
    if kernel.cell == "vanilla":
        attrs["activations"] = ["Relu"]
    if kernel.cell == "gru":
        attrs["linear_before_reset"] = 1
    inputs = ["x", "w", "r", "b", "", "h0"] + (["c0"] if kernel.cell == "lstm" else [])
    node = helper.make_node(OPS[kernel.cell], inputs, ["y"], **attrs)
    feeds = {"x": x}
    consts = {"w": w, "r": r, "b": b, "h0": h0, **({"c0": c0} if kernel.cell == "lstm" else {})}
    call = ctx.bound(node, feeds, {"y": y}, consts)
    ref: dict[str, np.ndarray] = {}

    def check() -> Check:
        if "h" not in ref:
            ref["h"] = reference(kernel.cell, x, w, r, b, h0, c0)
        return verdict(relative_error(y[:, 0], ref["h"]), precision, "reference-fp64")

    part = TimedPart(
        "fwd",
        call,
        check,
        kernel.flops("fwd", input_projection=True),
        kernel.min_bytes("fwd", precision),
        capturable=False,
        info={"operator": OPS[kernel.cell], "providers": list(call.providers)},
    )
    return Prepared(
        parts=[part],
        info={
            "input_projection_timed": True,
            "flops_include_input_projection": True,
            "directions": ["fwd"],
            "backward": BACKWARD_REASON,
        },
    )
