"""Convolution on onnxruntime: forward only, fp32 through Conv and int8 through ConvInteger
(int8 x int8 -> int32, exact, no requantization). NCHW, DeepBench's padding and stride.

onnxruntime is an inference runtime: it has no backward-data or backward-filter kernel (the
training build is another product), so the result holds the forward part alone and says so in
`info`; DeepBench's device results are forward-only too."""

from __future__ import annotations

import numpy as np
from onnx import helper

from ...catalog import ConvKernel
from ...precision import Precision
from ...reference.numpy_checks import check_conv_nchw
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import OrtContext

OPS = {Precision.FP32: "Conv", Precision.INT8: "ConvInteger"}
BACKWARD_REASON = "backward (bwd_data, bwd_filter) unsupported: onnxruntime is an inference runtime"


def prepare(ctx: OrtContext, kernel: ConvKernel, precision: Precision) -> Prepared:
    if precision not in OPS:
        raise Unsupported(
            f"onnxruntime convolution runs fp32 (Conv) and int8 with int32 accumulate "
            f"(ConvInteger); {precision.value} is not run by this backend"
        )
    kk = kernel
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), precision)
    w = ctx.weights((kk.k, kk.c, kk.r, kk.s), precision, scale=(kk.c * kk.r * kk.s) ** -0.5)
    out = np.empty((kk.n, kk.k, kk.out_h, kk.out_w), dtype=np.int32 if precision is Precision.INT8 else np.float32)
    node = helper.make_node(
        OPS[precision],
        ["x", "w"],
        ["y"],
        kernel_shape=[kk.r, kk.s],
        pads=[kk.pad_h, kk.pad_w, kk.pad_h, kk.pad_w],
        strides=[kk.stride_h, kk.stride_w],
        dilations=[1, 1],
        group=1,
    )
    call = ctx.bound(node, {"x": x}, {"y": out}, {"w": w})

    def check():
        return check_conv_nchw(out, x, w, kk.pad_h, kk.pad_w, kk.stride_h, kk.stride_w, precision, ctx.rng)

    part = TimedPart(
        "fwd",
        call,
        check,
        kernel.flops("fwd"),
        kernel.min_bytes("fwd", precision),
        capturable=False,
        info={"operator": OPS[precision], "weights": "initializer (constant)", "providers": list(call.providers)},
    )
    return Prepared(parts=[part], info={"directions": ["fwd"], "backward": BACKWARD_REASON})
