"""Normalization layers: inference batch normalization (running statistics) and layer/RMS
normalization over the last dimension, checked against their float64 formulas (kernels/reference/layers.py)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ...layers import BatchNormKernel, NormKernel
from ...precision import Precision
from ...reference import layers as ref
from ..contract.base import Prepared
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, host64, layer_dtype

EPS = ref.EPS  # torch's default; the models use 1e-5 (1e-12 in BERT: the cost is the same)
VAR_FLOOR = ref.VAR_FLOOR  # running variances drawn from [0.5, 1.5): positive, never constant


def prepare_batch_norm(ctx: TorchContext, kernel: BatchNormKernel, precision: Precision) -> Prepared:
    kk = kernel
    dtype = layer_dtype(ctx, kk, precision)
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), dtype)
    mean, weight, bias = (ctx.random((kk.c,), dtype) for _ in range(3))
    var = (torch.rand((kk.c,), generator=ctx.generator, device=ctx.device) + VAR_FLOOR).to(dtype)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = F.batch_norm(x, mean, var, weight, bias, training=False, eps=EPS)

    def reference() -> np.ndarray:
        return ref.batch_norm_nchw(host64(x), host64(mean), host64(var), host64(weight), host64(bias), EPS)

    return forward_part(kk, precision, run, lambda: out["y"], reference, ref.METHOD)


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

    def reference() -> np.ndarray:
        if kk.kind == "layer":
            return ref.layer_norm(host64(x), host64(weight), host64(bias), EPS)
        return ref.rms_norm(host64(x), host64(weight), EPS)

    return forward_part(kk, precision, run, lambda: out["y"], reference, ref.METHOD)
