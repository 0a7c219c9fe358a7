"""Normalization layers: inference batch normalization (running statistics) and layer/RMS
normalization over the last dimension, checked against their formulas in float64."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...layers import BatchNormKernel, NormKernel
from ...precision import Precision
from ..contract.base import Prepared
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, layer_dtype

EPS = 1e-5  # torch's default; the models use 1e-5 (1e-12 in BERT: the cost is the same)
VAR_FLOOR = 0.5  # running variances drawn from [0.5, 1.5): positive, never constant


def prepare_batch_norm(ctx: TorchContext, kernel: BatchNormKernel, precision: Precision) -> Prepared:
    kk = kernel
    dtype = layer_dtype(ctx, kk, precision)
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), dtype)
    mean, weight, bias = (ctx.random((kk.c,), dtype) for _ in range(3))
    var = (torch.rand((kk.c,), generator=ctx.generator, device=ctx.device) + VAR_FLOOR).to(dtype)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = F.batch_norm(x, mean, var, weight, bias, training=False, eps=EPS)

    def reference() -> torch.Tensor:
        per_channel = lambda t: t.double().view(1, -1, 1, 1)  # noqa: E731
        return (x.double() - per_channel(mean)) / torch.sqrt(per_channel(var) + EPS) * per_channel(
            weight
        ) + per_channel(bias)

    return forward_part(kk, precision, run, lambda: out["y"], reference, "reference-fp64")


def prepare_norm(ctx: TorchContext, kernel: NormKernel, precision: Precision) -> Prepared:
    kk = kernel
    dtype = layer_dtype(ctx, kk, precision)
    x = ctx.random((kk.rows, kk.cols), dtype)
    weight, bias = ctx.random((kk.cols,), dtype), ctx.random((kk.cols,), dtype)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        if kk.kind == "layer":
            out["y"] = F.layer_norm(x, (kk.cols,), weight, bias, EPS)
        else:
            out["y"] = F.rms_norm(x, (kk.cols,), weight, EPS)

    def reference() -> torch.Tensor:
        xd, wd = x.double(), weight.double()
        if kk.kind == "layer":
            centred = xd - xd.mean(-1, keepdim=True)
            return centred / torch.sqrt((centred**2).mean(-1, keepdim=True) + EPS) * wd + bias.double()
        return xd / torch.sqrt((xd**2).mean(-1, keepdim=True) + EPS) * wd

    return forward_part(kk, precision, run, lambda: out["y"], reference, "reference-fp64")
