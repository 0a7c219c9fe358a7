"""Recurrent layers on TFLite: vanilla (ReLU) as UNIDIRECTIONAL_SEQUENCE_RNN, LSTM (no
peepholes, no projection, no layer norm) as UNIDIRECTIONAL_SEQUENCE_LSTM, time-major, fp32.
TFLite has no builtin GRU operator, so GRU kernels are unsupported (the device suite has none).

Like ONNX's, these operators take the layer input and compute the input projection W x_t inside,
so the time includes it and the FLOPs count it (kernel.flops("fwd", input_projection=True)).
The hidden (and cell) state are variable tensors that the operator updates in place: each
invocation starts from the state the previous one left. The check therefore resets the
variables to zero, invokes once more (untimed) and compares with a float64 reference from zero
state (many steps, so the recurrent weights are exercised from step 2 on).
Integer RNNs in TFLite requantize the state to int8/int16 every step (no int32-accumulate
output), so int8 is unsupported. No backward: TFLite is an inference runtime."""

from __future__ import annotations

import numpy as np

from ...catalog import RnnKernel
from ...precision import Precision
from ...reference.numpy_checks import relative_error, verdict
from ...reference.rnn_numpy import Layer
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import TfliteContext
from .flatbuffer import NO_TENSOR, ModelSpec, OpSpec, TensorSpec
from .flatbuffer import schema as S

BACKWARD_REASON = "backward unsupported: TFLite is an inference runtime"
LSTM_GATES = ("input", "forget", "cell", "output")  # TFLite's order of the weight inputs
LSTM_INPUTS = 24


def reference(cell: str, x: np.ndarray, w: list[np.ndarray], r: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray:
    """Hidden states (T, N, H) in float64 (kernels/reference/rnn_numpy.py) from zero initial state; TFLite's
    per-gate W, R, b lists in its order (LSTM_GATES: input, forget, cell, output: the reference's i, f, g, o)."""
    hid = r[0].shape[0]
    w_all, r_all, b_all = (np.concatenate([a.astype(np.float64) for a in group]) for group in (w, r, b))
    zeros = np.zeros((x.shape[1], hid))
    return Layer(cell, x.astype(np.float64) @ w_all.T + b_all, r_all.T, zeros, zeros).forward()


def prepare(ctx: TfliteContext, kernel: RnnKernel, precision: Precision) -> Prepared:
    if kernel.cell == "gru":
        raise Unsupported("TFLite has no builtin GRU operator")
    if precision is not Precision.FP32:
        raise Unsupported(
            "TFLite's integer RNN/LSTM requantize the state to int8/int16 at every step (no int32 "
            f"accumulate output); {precision.value} is not run, fp32 is"
        )
    hid, steps, batch = kernel.hidden, kernel.timesteps, kernel.batch
    gates = 1 if kernel.cell == "vanilla" else 4
    x = ctx.random((steps, batch, hid), precision)
    w = [ctx.random((hid, hid), precision, scale=hid**-0.5) for _ in range(gates)]
    r = [ctx.random((hid, hid), precision, scale=hid**-0.5) for _ in range(gates)]
    b = [ctx.random((hid,), precision, scale=0.1) for _ in range(gates)]
    f32 = np.float32
    tensors = [TensorSpec("x", x.shape, f32)]
    tensors += [TensorSpec(f"w{g}", (hid, hid), f32, data=a) for g, a in enumerate(w)]
    tensors += [TensorSpec(f"r{g}", (hid, hid), f32, data=a) for g, a in enumerate(r)]
    tensors += [TensorSpec(f"b{g}", (hid,), f32, data=a) for g, a in enumerate(b)]
    w_idx, r_idx, b_idx = (list(range(1 + i * gates, 1 + (i + 1) * gates)) for i in range(3))
    state = len(tensors)
    if kernel.cell == "vanilla":
        tensors += [TensorSpec("h", (batch, hid), f32, variable=True), TensorSpec("y", (steps, batch, hid), f32)]
        inputs = [0, w_idx[0], r_idx[0], b_idx[0], state]
        options = S.SequenceRNNOptionsT(timeMajor=True, fusedActivationFunction=S.ActivationFunctionType.RELU)
        op = OpSpec(S.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_RNN, inputs, [state + 1], options)
        operator = "UNIDIRECTIONAL_SEQUENCE_RNN"
        out = state + 1
    else:
        tensors += [
            TensorSpec("h", (batch, hid), f32, variable=True),
            TensorSpec("c", (batch, hid), f32, variable=True),
            TensorSpec("y", (steps, batch, hid), f32),
        ]
        inputs = [NO_TENSOR] * LSTM_INPUTS
        inputs[0] = 0
        inputs[1:5], inputs[5:9], inputs[12:16] = w_idx, r_idx, b_idx
        inputs[18], inputs[19] = state, state + 1
        options = S.UnidirectionalSequenceLSTMOptionsT(
            fusedActivationFunction=S.ActivationFunctionType.TANH, cellClip=0.0, projClip=0.0, timeMajor=True
        )
        op = OpSpec(S.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM, inputs, [state + 2], options)
        operator = "UNIDIRECTIONAL_SEQUENCE_LSTM"
        out = state + 2
    model = ctx.interpreter(ModelSpec(tensors=tensors, op=op, inputs=[0], outputs=[out]))
    model.set_inputs(x)
    ref: dict[str, np.ndarray] = {}

    def check() -> Check:
        model.interp.reset_all_variables()
        model.invoke()
        if "h" not in ref:
            ref["h"] = reference(kernel.cell, x, w, r, b)
        return verdict(
            relative_error(model.output(), ref["h"]),
            precision,
            "reference-fp64",
            "from zero state after reset_all_variables",
        )

    part = TimedPart(
        "fwd",
        model.invoke,
        check,
        kernel.flops("fwd", input_projection=True),
        kernel.min_bytes("fwd", precision),
        info=model.info(operator),
        capturable=False,
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
