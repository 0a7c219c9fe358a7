"""The float64 recurrences the RNN checks compare against, and their tolerance: shared by the
PyTorch backend's plain recurrence (backends/pytorch/rnn.py) and cuDNN's layers
(backends/pytorch/rnn_cudnn.py), which both check against the same reference, so neither has to
import the other; in the reference layer because a reference written from the definition belongs to
no library under test (kernels/reference/__init__.py)."""

from __future__ import annotations

import torch

from ..catalog import RnnKernel
from ..precision import Precision, recurrence_tolerance

GATES = {"vanilla": 1, "lstm": 4, "gru": 3}


def recurrence(cell: str, proj: torch.Tensor, r_t: torch.Tensor, b_n: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """All hidden states (T, N, H) from input projections `proj` (T, N, G*H), R^T (H, G*H) and
    a random initial state h0 (N, H) (also the LSTM's initial cell state): with a zero h0 the
    weight gradient of a one-step layer would be zero and its check could not fail."""
    steps = proj.shape[0]
    h, c = h0, h0
    outs = []
    for t in range(steps):
        if cell == "vanilla":
            h = torch.relu(torch.addmm(proj[t], h, r_t))
        elif cell == "lstm":
            gates = torch.addmm(proj[t], h, r_t)
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        else:  # gru
            rec = torch.mm(h, r_t)
            p_r, p_z, p_n = proj[t].chunk(3, dim=1)
            h_r, h_z, h_n = rec.chunk(3, dim=1)
            reset = torch.sigmoid(p_r + h_r)
            update = torch.sigmoid(p_z + h_z)
            new = torch.tanh(p_n + reset * (h_n + b_n))
            h = (1 - update) * new + update * h
        outs.append(h)
    return torch.stack(outs)


def rnn_tolerance(kernel: RnnKernel, precision: Precision, direction: str) -> float:
    return recurrence_tolerance(precision, kernel.hidden, kernel.batch, kernel.timesteps, direction)


def relu_recurrence_masked(
    proj: torch.Tensor, r_t: torch.Tensor, h0: torch.Tensor, library_h: torch.Tensor
) -> torch.Tensor:
    """The vanilla (ReLU) recurrence in float64 with each step's ReLU mask taken from the
    library's own forward states. Why: a pre-activation within rounding distance of zero takes
    opposite signs in float64 and in fp16/fp32, and the gradient through that unit then differs
    entirely (ReLU's derivative jumps); with masks shared, the reference differs from the library
    only by rounding, which is what the tolerance bounds. Where masks agree it is the exact ReLU
    recurrence; the forward check still uses the plain float64 ReLU."""
    h = h0
    outs = []
    for t in range(proj.shape[0]):
        h = (proj[t] + h @ r_t) * (library_h[t] > 0).to(proj.dtype)
        outs.append(h)
    return torch.stack(outs)
