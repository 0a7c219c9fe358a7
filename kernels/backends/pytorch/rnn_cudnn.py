"""Recurrent layers through cuDNN (nn.RNN / nn.LSTM / nn.GRU on CUDA), as DeepBench ran them.

What cuDNN includes, which DeepBench's rule would leave out: cuDNN's RNN call computes the input
projection W x_t for all t inside the layer (one large GEMM before the recurrence), so the timed
forward includes it and its FLOPs are counted (kernel.flops(direction, input_projection=True)).
Backward: cuDNN's weight gradient needs its data pass (cudnnRNNBackwardData, which yields dh
through time and, with it, dx), so the timed backward is data + weights even though no input
gradient is requested. DeepBench's own cuDNN benchmark timed the same two calls.

Forward runs in training mode (keeping cuDNN's reserve space) for training sets and in inference
mode for inference sets. Both directions are captured in CUDA graphs like every GPU operation; the
backward's replays reuse one forward's saved tensors (retain_graph), so no forward is timed.
Checks: the float64 recurrence of kernels/reference/rnn.py with the layer's own weights
(hidden states for fwd; the recurrent weight gradient dW_hh for bwd)."""

from __future__ import annotations

from typing import Any, cast

import torch

from ...catalog import RnnKernel
from ...precision import Precision
from ...reference.rnn import recurrence, relu_recurrence_masked, rnn_tolerance
from ...reference.torch_checks import relative_error, verdict
from ...results import Check
from ..contract.base import Prepared, TimedPart
from ..shared.torch_context import TorchContext

MODULES = {
    "vanilla": lambda h, **kw: torch.nn.RNN(h, h, nonlinearity="relu", **kw),
    "lstm": lambda h, **kw: torch.nn.LSTM(h, h, **kw),
    "gru": lambda h, **kw: torch.nn.GRU(h, h, **kw),
}


TIMED_NOTE = (
    "cuDNN computes the input projection inside the layer and needs its data-gradient pass "
    "for weight gradients; both are timed and the projection's FLOPs counted"
)


def float64_reference(
    kernel: RnnKernel, layer: torch.nn.RNNBase, x: torch.Tensor, hx: Any, h0: torch.Tensor, d_y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The hidden states and dW_hh in float64 from the layer's own weights (kernels/reference/rnn.py's
    recurrence); a ReLU cell's masks fixed by the signs of the library's own hidden states."""
    hid = kernel.hidden
    w_ih, w_hh, b_ih, b_hh = (
        cast(torch.Tensor, p).detach().double()
        for p in (layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0, layer.bias_hh_l0)
    )
    proj = x.double() @ w_ih.t() + b_ih
    if kernel.cell == "gru":  # cuDNN/PyTorch GRU: b_hn sits inside the reset gate
        proj = proj + torch.cat([b_hh[: 2 * hid], torch.zeros_like(b_hh[2 * hid :])])
        b_n = b_hh[2 * hid :]
    else:
        proj = proj + b_hh
        b_n = torch.zeros(hid, dtype=torch.float64, device=x.device)
    r_t = w_hh.t().clone().requires_grad_(True)
    if kernel.cell == "vanilla":
        with torch.no_grad():
            library_h = layer(x, hx)[0].detach()
        h = relu_recurrence_masked(proj, r_t, h0[0].double(), library_h)
    else:
        h = recurrence(kernel.cell, proj, r_t, b_n, h0[0].double())
    (d_r,) = torch.autograd.grad(h, r_t, d_y.double())
    return h.detach(), d_r.t()


def seeded_layer(ctx: TorchContext, kernel: RnnKernel, dtype: torch.dtype) -> torch.nn.RNNBase:
    """The layer (cuDNN's under torch.nn), its weights random, seeded, scaled as nn's default init."""
    layer = MODULES[kernel.cell](kernel.hidden, device=ctx.device, dtype=dtype)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(ctx.random(tuple(p.shape), dtype, scale=kernel.hidden**-0.5))
    layer.flatten_parameters()
    return layer


def prepare(ctx: TorchContext, kernel: RnnKernel, precision: Precision) -> Prepared:
    dtype = ctx.dtype(precision)
    hid, steps, batch = kernel.hidden, kernel.timesteps, kernel.batch
    layer = seeded_layer(ctx, kernel, dtype)
    x = ctx.random((steps, batch, hid), dtype)
    h0 = ctx.random((1, batch, hid), dtype)
    hx = (h0, h0.clone()) if kernel.cell == "lstm" else h0
    d_y = ctx.random((steps, batch, hid), dtype)
    training = not kernel.set.startswith("inference")
    state: dict[str, torch.Tensor] = {}

    def fwd() -> None:
        with torch.set_grad_enabled(training):
            state["y"] = layer(x, hx)[0].detach()  # keeps no autograd graph alive (see bwd)

    forward: dict[str, Any] = {}  # the kept forward's output and its stream

    def bwd() -> None:
        """dW_hh back-propagated through a kept forward. Autograd runs each backward op on the
        stream its forward op ran on (the weights' gradient sink, too: on the stream of the first
        forward that needed it while any graph holds it), and a CUDA graph captures only its own
        stream: the forward is made again (untimed), with no other graph alive, when a call
        outside a capture runs on another stream than the kept one's (timing/graph.py capture makes
        one such call on the capture stream first)."""
        stream = torch.cuda.current_stream().cuda_stream
        if forward.get("stream") != stream and not torch.cuda.is_current_stream_capturing():
            forward.clear()
            forward.update(y=layer(x, hx)[0], stream=stream)
        weight_hh = cast(torch.Tensor, layer.weight_hh_l0)  # a module's attributes are typed Tensor | Module
        (state["dw_hh"],) = torch.autograd.grad(forward["y"], weight_hh, d_y, retain_graph=True)

    reference: dict[str, torch.Tensor] = {}

    def ref() -> tuple[torch.Tensor, torch.Tensor]:
        if not reference:
            reference.update(zip(("y", "dw_hh"), float64_reference(kernel, layer, x, hx, h0, d_y), strict=True))
        return reference["y"], reference["dw_hh"]

    def check_fwd() -> Check:
        return verdict(
            relative_error(state["y"], ref()[0]),
            precision,
            "reference-fp64",
            tol=rnn_tolerance(kernel, precision, "fwd"),
        )

    def check_bwd() -> Check:
        return verdict(
            relative_error(state["dw_hh"], ref()[1]),
            precision,
            "reference-fp64",
            "recurrent weight gradient dW_hh",
            tol=rnn_tolerance(kernel, precision, "bwd"),
        )

    info = {
        "library": "cuDNN (torch.nn." + type(layer).__name__ + ")",
        "forward_mode": "training" if training else "inference",
        "input_projection_timed": True,
        "input_gradient_timed": True,
        "note": TIMED_NOTE,
    }
    timed = [("fwd", fwd, check_fwd), *([("bwd", bwd, check_bwd)] if training else [])]
    parts = [
        TimedPart(
            d, run, check, kernel.flops(d, input_projection=True), kernel.min_bytes(d, precision), info=dict(info)
        )
        for d, run, check in timed
    ]
    return Prepared(parts=parts, info=info)
