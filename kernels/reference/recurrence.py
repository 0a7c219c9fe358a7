"""The float64 recurrences of the three RNN cells on numpy arrays, for the backends that hand back numpy
arrays (onnxruntime, LiteRT, oneDNN): written from the cells' definitions, never by the library under
test, and apart from every backend (kernels/reference/rnn.py is the same definition on torch tensors,
for the torch-based backends; this module imports no torch, so the torch-less backends can read it).

Each library stacks its gates in its own order; `order` names them as stored: `i`, `f`, `o` (input,
forget, output) and `c` (the LSTM's cell candidate); `z`, `r`, `n` (the GRU's update, reset and new gates).
The GRU is the linear-before-reset form (cuDNN's, ONNX's linear_before_reset=1): the reset gate multiplies
(R_n h + Rb_n)."""

from __future__ import annotations

import numpy as np

LSTM_GATES = frozenset("ifoc")
GRU_GATES = frozenset("zrn")


def sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def hidden_states(
    cell: str,
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    wb: np.ndarray,
    rb: np.ndarray,
    h0: np.ndarray,
    c0: np.ndarray | None = None,
    order: str = "",
) -> np.ndarray:
    """All hidden states (T, N, H) in float64. x (T, N, I); w (G*H, I) and r (G*H, H) the input and
    recurrent weights of the G gates stacked in `order`; wb, rb (G*H,) their biases; h0 (N, H) and, for an
    LSTM, c0 the initial states. A vanilla cell is ReLU(W x + wb + R h + rb)."""
    w64, r64, wb64, rb64 = (np.asarray(a, dtype=np.float64) for a in (w, r, wb, rb))
    h = np.asarray(h0, dtype=np.float64)
    c = np.zeros_like(h) if c0 is None else np.asarray(c0, dtype=np.float64)
    hid = h.shape[1]
    if (cell == "lstm" and set(order) != LSTM_GATES) or (cell == "gru" and set(order) != GRU_GATES):
        raise ValueError(f"a {cell} cell's gates are {sorted(LSTM_GATES if cell == 'lstm' else GRU_GATES)}: {order!r}")
    at = {gate: slice(j * hid, (j + 1) * hid) for j, gate in enumerate(order)}
    outs = []
    for xt in np.asarray(x, dtype=np.float64):
        px, ph = xt @ w64.T + wb64, h @ r64.T + rb64
        if cell == "vanilla":
            h = np.maximum(px + ph, 0.0)
        elif cell == "lstm":
            g = px + ph
            c = sigmoid(g[:, at["f"]]) * c + sigmoid(g[:, at["i"]]) * np.tanh(g[:, at["c"]])
            h = sigmoid(g[:, at["o"]]) * np.tanh(c)
        else:
            z = sigmoid(px[:, at["z"]] + ph[:, at["z"]])
            reset = sigmoid(px[:, at["r"]] + ph[:, at["r"]])
            h = (1 - z) * np.tanh(px[:, at["n"]] + reset * ph[:, at["n"]]) + z * h
        outs.append(h)
    return np.stack(outs)
