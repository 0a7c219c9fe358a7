"""2-D max and average pooling (oneDNN on CPU, cuDNN on CUDA through PyTorch).

The reference unfolds the padded input into windows in float64 (padding -inf for max, zeros
for average with count_include_pad) and reduces each window: the definition, not the kernel."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...layers import PoolingKernel
from ...precision import Precision
from ..contract.base import Prepared
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, layer_dtype

CHECK_IMAGES = 2  # the reference covers the first and the last image of the batch


def prepare(ctx: TorchContext, kernel: PoolingKernel, precision: Precision) -> Prepared:
    kk = kernel
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), layer_dtype(ctx, kk, precision))
    window, stride, pad = (kk.r, kk.s), (kk.stride_h, kk.stride_w), (kk.pad_h, kk.pad_w)
    out: dict[str, torch.Tensor] = {}
    images = sorted({0, kk.n - 1})[:CHECK_IMAGES]

    def run() -> None:
        if kk.mode == "max":
            out["y"] = F.max_pool2d(x, window, stride, pad)
        else:
            out["y"] = F.avg_pool2d(x, window, stride, pad, count_include_pad=True)

    def reference() -> torch.Tensor:
        xs = x[images].double()
        fill = float("-inf") if kk.mode == "max" else 0.0
        xp = F.pad(xs, (kk.pad_w, kk.pad_w, kk.pad_h, kk.pad_h), value=fill)
        cols = xp.unfold(2, kk.r, kk.stride_h).unfold(3, kk.s, kk.stride_w)  # n, c, oh, ow, r, s
        cols = cols[:, :, : kk.out_h, : kk.out_w].reshape(*cols.shape[:4], -1)
        return cols.amax(-1) if kk.mode == "max" else cols.sum(-1) / (kk.r * kk.s)

    return forward_part(
        kk,
        precision,
        run,
        lambda: out["y"][images],
        reference,
        "reference-fp64",
        f"images {images} against unfolded windows",
    )
