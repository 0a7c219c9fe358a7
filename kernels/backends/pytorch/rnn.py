"""Recurrent layers on PyTorch, following DeepBench's rules on what is timed.

The input projection W x_t + b for all t is computed once, before timing (it is one large GEMM
outside the recurrence), and the timed forward is the recurrence alone: per step one GEMM
h_{t-1} R^T through the BLAS (addmm) and the cell's element-wise gates. The timed backward is
back-propagation through time for the recurrent weights: dR and the dh recursion, but no
gradient for the inputs (the projections do not require grad), as DeepBench's backward computes
weight gradients, not input gradients.

Cells: vanilla h = relu(p + R h); LSTM without peepholes (gates i, f, g, o); GRU in cuDNN's
form, where the reset gate multiplies (R_n h + b_n).
"""

from __future__ import annotations

import torch

from ...catalog import RnnKernel
from ...precision import Precision
from ...reference.rnn import GATES, recurrence, relu_recurrence_masked, rnn_tolerance
from ...reference.torch_checks import relative_error, verdict
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from ..shared.torch_context import TorchContext
from . import rnn_cudnn


def prepare(ctx: TorchContext, kernel: RnnKernel, precision: Precision) -> Prepared:
    if precision in (Precision.INT8, Precision.FP8):
        raise Unsupported(f"PyTorch has no {precision.value} recurrent layer with 32-bit accumulate")
    if ctx.is_cuda:  # DeepBench ran cuDNN's RNN on NVIDIA GPUs; rnn_cudnn says what that includes
        return rnn_cudnn.prepare(ctx, kernel, precision)
    dtype = ctx.dtype(precision)
    hid, gates = kernel.hidden, GATES[kernel.cell]
    proj = ctx.random((kernel.timesteps, kernel.batch, gates * hid), dtype)
    r_t = ctx.random((hid, gates * hid), dtype, scale=hid**-0.5).requires_grad_(True)
    b_n = ctx.random((hid,), dtype)
    d_h = ctx.random((kernel.timesteps, kernel.batch, hid), dtype)
    h0 = ctx.random((kernel.batch, hid), dtype)
    state: dict[str, torch.Tensor] = {}

    def fwd() -> None:
        with torch.no_grad():
            state["h"] = recurrence(kernel.cell, proj, r_t, b_n, h0)

    graph: dict[str, torch.Tensor] = {}

    def bwd() -> None:
        if "h" not in graph:
            graph["h"] = recurrence(kernel.cell, proj, r_t, b_n, h0)
        (state["dr"],) = torch.autograd.grad(graph["h"], r_t, d_h, retain_graph=True)

    reference: dict[str, torch.Tensor] = {}

    def ref() -> tuple[torch.Tensor, torch.Tensor]:
        if not reference:
            r64 = r_t.detach().double().requires_grad_(True)
            if kernel.cell == "vanilla":  # ReLU's masks from the library's own states (see relu_recurrence_masked)
                with torch.no_grad():
                    library_h = recurrence(kernel.cell, proj, r_t, b_n, h0)
                h64 = relu_recurrence_masked(proj.double(), r64, h0.double(), library_h)
            else:
                h64 = recurrence(kernel.cell, proj.double(), r64, b_n.double(), h0.double())
            (dr64,) = torch.autograd.grad(h64, r64, d_h.double())
            reference.update(h=h64.detach(), dr=dr64)
        return reference["h"], reference["dr"]

    def check_fwd() -> Check:
        return verdict(
            relative_error(state["h"], ref()[0]),
            precision,
            "reference-fp64",
            tol=rnn_tolerance(kernel, precision, "fwd"),
        )

    def check_bwd() -> Check:
        return verdict(
            relative_error(state["dr"], ref()[1]),
            precision,
            "reference-fp64",
            tol=rnn_tolerance(kernel, precision, "bwd"),
        )

    parts = [
        TimedPart("fwd", fwd, check_fwd, kernel.flops("fwd"), kernel.min_bytes("fwd", precision), capturable=True),
        TimedPart("bwd", bwd, check_bwd, kernel.flops("bwd"), kernel.min_bytes("bwd", precision), capturable=False),
    ]
    return Prepared(
        parts=parts,
        info={
            "input_projection_timed": False,
            "input_gradient_timed": False,
            "implementation": "per-step addmm (BLAS) + element-wise gates",
        },
    )
