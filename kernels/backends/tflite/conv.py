"""Convolution on TFLite as one CONV_2D operator, forward only, fp32 and int8.

TFLite is NHWC with OHWI filters: the harness draws NCHW data (DeepBench's layout) and hands
TFLite the transposed copies; the check reads the NHWC output through a transposed view. CONV_2D pads only SAME or
VALID: a kernel whose padding is neither is unsupported (every device-suite convolution is one
of the two). int8: int32 accumulate, per-channel filter scales (TFLite requires them for int8),
output requantized to int8 with a power-of-two scale and checked at random points against the
exact accumulator's rounding (see gemm.py). TFLite 2.14's CONV_2D requires a bias input
(conv.cc: has_bias), so the model has a random one (float32, or int32 at the accumulator's scale
for int8) and the reference adds it. No backward: TFLite is an inference runtime."""

from __future__ import annotations

import math

import numpy as np

from ...catalog import ConvKernel
from ...precision import Precision
from ...reference.numpy_checks import check_conv_nchw, check_requantized, conv_points, conv_reference_at
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import INT8_MAX, INT8_MIN, TfliteContext, output_scale
from .flatbuffer import ModelSpec, OpSpec, Quant, TensorSpec
from .flatbuffer import schema as S

BACKWARD_REASON = "backward (bwd_data, bwd_filter) unsupported: TFLite is an inference runtime"
INT8_CONV_VERSION = 3
BIAS_INT32_RANGE = 1 << 12


def tflite_padding(size: int, r: int, stride: int, pad: int, out: int) -> int | None:
    """Which TFLite padding reproduces (pad, out) on one axis, or None."""
    if pad == 0 and out == (size - r) // stride + 1:
        return S.Padding.VALID
    same_out = math.ceil(size / stride)
    total = max((same_out - 1) * stride + r - size, 0)
    if out == same_out and total % 2 == 0 and total // 2 == pad:
        return S.Padding.SAME
    return None


def prepare(ctx: TfliteContext, kernel: ConvKernel, precision: Precision) -> Prepared:
    if precision not in (Precision.FP32, Precision.INT8):
        raise Unsupported(f"TFLite CONV_2D runs fp32 and int8 here; {precision.value} is not run")
    kk = kernel
    ph = tflite_padding(kk.h, kk.r, kk.stride_h, kk.pad_h, kk.out_h)
    pw = tflite_padding(kk.w, kk.s, kk.stride_w, kk.pad_w, kk.out_w)
    if ph is None or pw is None or ph != pw:
        raise Unsupported(
            f"TFLite CONV_2D pads only SAME or VALID; padding {kk.pad_h}x{kk.pad_w} with stride "
            f"{kk.stride_h}x{kk.stride_w} is neither"
        )
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), precision)
    w = ctx.weights((kk.k, kk.c, kk.r, kk.s), precision, scale=(kk.c * kk.r * kk.s) ** -0.5)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    w_ohwi = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
    out_shape = (kk.n, kk.out_h, kk.out_w, kk.k)
    reduction = kk.c * kk.r * kk.s
    if precision is Precision.INT8:
        bias = ctx.rng.integers(-BIAS_INT32_RANGE, BIAS_INT32_RANGE + 1, size=kk.k).astype(np.int32)
    else:
        bias = ctx.random((kk.k,), precision)
    scale = output_scale(reduction)
    if precision is Precision.INT8:
        tensors = [
            TensorSpec("x", x_nhwc.shape, np.int8, quant=Quant([1.0], [0])),
            TensorSpec("w", w_ohwi.shape, np.int8, data=w_ohwi, quant=Quant([1.0] * kk.k, [0] * kk.k, 0)),
            TensorSpec("b", (kk.k,), np.int32, data=bias, quant=Quant([1.0] * kk.k, [0] * kk.k, 0)),
            TensorSpec("y", out_shape, np.int8, quant=Quant([scale], [0])),
        ]
        version = INT8_CONV_VERSION
    else:
        tensors = [
            TensorSpec("x", x_nhwc.shape, np.float32),
            TensorSpec("w", w_ohwi.shape, np.float32, data=w_ohwi),
            TensorSpec("b", (kk.k,), np.float32, data=bias),
            TensorSpec("y", out_shape, np.float32),
        ]
        version = 1
    options = S.Conv2DOptionsT(
        padding=ph, strideW=kk.stride_w, strideH=kk.stride_h, dilationWFactor=1, dilationHFactor=1
    )
    op = OpSpec(S.BuiltinOperator.CONV_2D, [0, 1, 2], [3], options, version=version)
    model = ctx.interpreter(ModelSpec(tensors=tensors, op=op, inputs=[0], outputs=[3]))
    model.set_inputs(x_nhwc)
    info = model.info("CONV_2D")
    info["padding"] = "SAME" if ph == S.Padding.SAME else "VALID"

    def check() -> Check:
        y = model.output().transpose(0, 3, 1, 2)  # NHWC -> NCHW view
        if precision is Precision.FP32:
            return check_conv_nchw(y, x, w, kk.pad_h, kk.pad_w, kk.stride_h, kk.stride_w, precision, ctx.rng, bias)
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (kk.pad_h, kk.pad_h), (kk.pad_w, kk.pad_w)))
        pts = conv_points(ctx.rng, *y.shape)
        acc = np.array([conv_reference_at(xp, w, *p, kk.stride_h, kk.stride_w) + float(bias[p[1]]) for p in pts])
        got = np.array([y[p] for p in pts])
        return check_requantized(got, acc, 1.0 / scale, 0, INT8_MIN, INT8_MAX)

    if precision is Precision.INT8:
        info.update(output="int8, requantized from the int32 accumulator", output_scale=scale, accumulate="int32")
    part = TimedPart(
        "fwd", model.invoke, check, kernel.flops("fwd"), kernel.min_bytes("fwd", precision), info=info, capturable=False
    )
    return Prepared(parts=[part], info={"directions": ["fwd"], "backward": BACKWARD_REASON})
