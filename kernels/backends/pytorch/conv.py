"""Convolution on PyTorch (oneDNN on CPU, cuDNN on CUDA): forward, backward-data and
backward-filter, each a separate library call timed separately (aten::convolution_backward with
one output mask bit set computes only that gradient); the forward pass alone in the inference
sets, as DeepBench's inference timed it (Kernel.forward_only).

The check samples output elements at random and recomputes each exactly in float64 from its
definition (a dot product over the receptive field), independent of the library under test
(kernels/reference/conv.py, the reference the cuDNN backend is held to as well)."""

from __future__ import annotations

import torch

from ...catalog import ConvKernel
from ...precision import TRANSFORM_TOLERANCE, Precision
from ...reference.conv import ConvSampler, padded_conv, transform_aware
from ..contract.base import Prepared, TimedPart, Unsupported
from ..contract.timed_directions import INFERENCE_FORWARD_ONLY
from ..shared.torch_context import TorchContext

DILATION = [1, 1]
OUTPUT_PADDING = [0, 0]
GROUPS = 1
# PyTorch does not report the engine cuDNN chose; it records how it asked for one.
CUDNN_INFO = {
    "library": "cuDNN",
    "algorithm": "torch.backends.cudnn.benchmark=True: cuDNN's find timed its "
    "algorithms at the warm-up call and the fastest is used (engine id not exposed by PyTorch)",
    "layout": "NCHW",
}


def prepare(ctx: TorchContext, kernel: ConvKernel, precision: Precision) -> Prepared:
    if precision in (Precision.INT8, Precision.FP8):
        raise Unsupported(
            f"PyTorch has no {precision.value} convolution with 32-bit accumulate and output "
            "(its quantized convolution requantizes to 8 bits); run fp32, fp16 or bf16"
        )
    dtype = ctx.dtype(precision)
    kk, padded = padded_conv(kernel, precision, ctx.pad)
    stride, pad = [kk.stride_h, kk.stride_w], [kk.pad_h, kk.pad_w]
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), dtype)
    w = ctx.random((kk.k, kk.c, kk.r, kk.s), dtype, scale=(kk.c * kk.r * kk.s) ** -0.5)
    dy = ctx.random((kk.n, kk.k, kk.out_h, kk.out_w), dtype)
    out: dict[str, torch.Tensor] = {}

    def fwd() -> None:
        out["y"] = torch.ops.aten.convolution(x, w, None, stride, pad, DILATION, False, OUTPUT_PADDING, GROUPS)

    def bwd_data() -> None:
        out["dx"] = torch.ops.aten.convolution_backward(
            dy, x, w, None, stride, pad, DILATION, False, OUTPUT_PADDING, GROUPS, [True, False, False]
        )[0]

    def bwd_filter() -> None:
        out["dw"] = torch.ops.aten.convolution_backward(
            dy, x, w, None, stride, pad, DILATION, False, OUTPUT_PADDING, GROUPS, [False, True, False]
        )[1]

    sampler = ConvSampler(ctx, kk, x, w, dy)
    parts = [
        TimedPart(
            "fwd",
            fwd,
            lambda: sampler.check_fwd(out["y"], precision),
            kernel.flops("fwd"),
            kernel.min_bytes("fwd", precision),
        ),
        TimedPart(
            "bwd_data",
            bwd_data,
            lambda: sampler.check_bwd_data(out["dx"], precision),
            kernel.flops("bwd_data"),
            kernel.min_bytes("bwd_data", precision),
        ),
        TimedPart(
            "bwd_filter",
            bwd_filter,
            lambda: sampler.check_bwd_filter(out["dw"], precision),
            kernel.flops("bwd_filter"),
            kernel.min_bytes("bwd_filter", precision),
        ),
    ]
    parts = [p for p in parts if p.direction in kernel.timed()]
    if ctx.is_cuda:
        for p in parts:
            p.info.update(CUDNN_INFO)
            if precision in TRANSFORM_TOLERANCE:
                p.check = transform_aware(p, precision)
    info = {"directions": ["fwd"], "backward": INFERENCE_FORWARD_ONLY} if kernel.forward_only else {}
    return Prepared(parts=parts, padding=padded, info=info)
