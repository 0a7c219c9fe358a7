"""2-D max and average pooling (oneDNN on CPU, cuDNN on CUDA through PyTorch).

The reference (kernels/reference/layers.py) unfolds the padded input into windows in float64 (padding
-inf for max, zeros for average with count_include_pad) and reduces each window: the definition, not
the kernel."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ...layers import PoolingKernel
from ...precision import Precision
from ...reference import layers as ref
from ..contract.base import Prepared
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, host64, layer_dtype

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

    def reference() -> np.ndarray:
        return ref.pool_nchw(
            host64(x[images]), kk.mode, kk.r, kk.s, kk.pad_h, kk.pad_w, kk.stride_h, kk.stride_w, kk.out_h, kk.out_w
        )

    return forward_part(
        kk,
        precision,
        run,
        lambda: out["y"][images],
        reference,
        ref.METHOD,
        f"images {images} against unfolded windows",
    )
