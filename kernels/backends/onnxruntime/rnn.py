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
from ...reference.recurrence import hidden_states
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import OrtContext

OPS = {"vanilla": "RNN", "lstm": "LSTM", "gru": "GRU"}
GATES = {"vanilla": 1, "lstm": 4, "gru": 3}
BACKWARD_REASON = "backward unsupported: onnxruntime is an inference runtime"


# ONNX's gate orders (its operators' spec: LSTM i, o, f, c; GRU z, r, h), as kernels/reference/recurrence.py names them.
GATE_ORDER = {"vanilla": "", "lstm": "iofc", "gru": "zrn"}


def reference(
    cell: str, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray, h0: np.ndarray, c0: np.ndarray
) -> np.ndarray:
    """All hidden states (T, N, H) in float64 (the reference layer's recurrence) from ONNX's tensors: one
    direction's W, R, and the bias Wb and Rb concatenated."""
    half = b.shape[1] // 2
    return hidden_states(cell, x, w[0], r[0], b[0, :half], b[0, half:], h0[0], c0[0], GATE_ORDER[cell])


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
