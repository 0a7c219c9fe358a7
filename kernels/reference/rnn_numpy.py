"""The float64 recurrences of the RNN checks in numpy, forward and back through time, for the backends
whose outputs are numpy arrays (oneDNN through ctypes): the formulas of kernels/reference/rnn.py
(vanilla ReLU, LSTM without peepholes, GRU with the reset gate applied after the recurrent product,
cuDNN's and PyTorch's "linear before reset" form) without PyTorch.

A layer is given by its input projections P (T, N, G*H: W x_t + the input-side biases, every step),
its recurrent weights R (H, G*H, so that a step's recurrent part is h @ R), the bias that GRU keeps
inside its reset gate (b_n, H) and random initial states. Gates sit in blocks of H along the last
axis in the order `GATE_ORDER` names (oneDNN's order: LSTM i, f, g, o; GRU u, r, n).

`recurrent_weight_gradient` back-propagates dL/dh_t = dy_t through the layer and returns dL/dR,
the gradient the backward checks hold a library's to (DeepBench's backward: weight gradients).
For the vanilla cell the ReLU masks may come from the library's own forward states
(reference/rnn.py relu_recurrence_masked says why)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GATE_ORDER = {"vanilla": ("a",), "lstm": ("i", "f", "g", "o"), "gru": ("u", "r", "n")}


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


@dataclass
class Layer:
    cell: str
    proj: np.ndarray  # (T, N, G*H)
    r: np.ndarray  # (H, G*H)
    h0: np.ndarray  # (N, H)
    c0: np.ndarray  # (N, H): the LSTM's initial cell state
    b_n: np.ndarray | None = None  # (H,): GRU's bias inside the reset gate
    relu_masks: np.ndarray | None = None  # (T, N, H) booleans: the vanilla cell's ReLU masks, where given
    saved: list[dict[str, np.ndarray]] = field(default_factory=list)

    @property
    def hidden(self) -> int:
        return self.h0.shape[1]

    def _gates(self, z: np.ndarray) -> list[np.ndarray]:
        return [z[:, j * self.hidden : (j + 1) * self.hidden] for j in range(len(GATE_ORDER[self.cell]))]

    def step(self, t: int, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """h_t, c_t from h_{t-1}, c_{t-1}; what the backward pass needs is saved."""
        rec = h @ self.r
        p = self.proj[t]
        if self.cell == "vanilla":
            a = p + rec
            mask = a > 0 if self.relu_masks is None else self.relu_masks[t]
            self.saved.append({"h": h, "mask": mask})
            return a * mask, c
        if self.cell == "lstm":
            zi, zf, zg, zo = self._gates(p + rec)
            i, f, g, o = _sigmoid(zi), _sigmoid(zf), np.tanh(zg), _sigmoid(zo)
            c_new = f * c + i * g
            self.saved.append({"h": h, "c": c, "i": i, "f": f, "g": g, "o": o, "tc": np.tanh(c_new)})
            return o * np.tanh(c_new), c_new
        pu, pr, pn = self._gates(p)
        hu, hr, hn = self._gates(rec)
        hn = hn + (self.b_n if self.b_n is not None else 0.0)
        u, r = _sigmoid(pu + hu), _sigmoid(pr + hr)
        n = np.tanh(pn + r * hn)
        self.saved.append({"h": h, "u": u, "r": r, "n": n, "hn": hn})
        return u * h + (1 - u) * n, c

    def forward(self) -> np.ndarray:
        """Every hidden state (T, N, H)."""
        self.saved.clear()
        h, c = self.h0.astype(np.float64), self.c0.astype(np.float64)
        out = []
        for t in range(self.proj.shape[0]):
            h, c = self.step(t, h, c)
            out.append(h)
        return np.stack(out)


def _back_step(layer: Layer, s: dict[str, np.ndarray], dh: np.ndarray, dc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dL/dz of the step's recurrent products, dL/dc_{t-1}) from dL/dh_t and dL/dc_t."""
    if layer.cell == "vanilla":
        return dh * s["mask"], dc
    if layer.cell == "lstm":
        dc = dc + dh * s["o"] * (1 - s["tc"] ** 2)
        dz = [
            dc * s["g"] * s["i"] * (1 - s["i"]),
            dc * s["c"] * s["f"] * (1 - s["f"]),
            dc * s["i"] * (1 - s["g"] ** 2),
            dh * s["tc"] * s["o"] * (1 - s["o"]),
        ]
        return np.concatenate(dz, axis=1), dc * s["f"]
    du = dh * (s["h"] - s["n"])
    dzn = dh * (1 - s["u"]) * (1 - s["n"] ** 2)
    dzr = dzn * s["hn"] * s["r"] * (1 - s["r"])
    return np.concatenate([du * s["u"] * (1 - s["u"]), dzr, dzn * s["r"]], axis=1), dc


def recurrent_weight_gradient(layer: Layer, dy: np.ndarray) -> np.ndarray:
    """dL/dR (H, G*H) for L = sum(h_t * dy_t) over the states of `layer.forward()` (called here)."""
    layer.forward()
    dr = np.zeros_like(layer.r, dtype=np.float64)
    dh_next = np.zeros_like(layer.h0, dtype=np.float64)
    dc = np.zeros_like(layer.h0, dtype=np.float64)
    for t in reversed(range(len(layer.saved))):
        s = layer.saved[t]
        dh = dy[t] + dh_next
        dz, dc = _back_step(layer, s, dh, dc)
        dr += s["h"].T @ dz
        dh_next = dz @ layer.r.T + (dh * s["u"] if layer.cell == "gru" else 0.0)
    return dr
