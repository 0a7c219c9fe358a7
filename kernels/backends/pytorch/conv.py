"""Convolution on PyTorch (oneDNN on CPU, cuDNN on CUDA): forward, backward-data and
backward-filter, each a separate library call timed separately (aten::convolution_backward with
one output mask bit set computes only that gradient).

The check samples output elements at random and recomputes each exactly in float64 from its
definition (a dot product over the receptive field), independent of the library under test."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ... import padding
from ...catalog import ConvKernel
from ...padding import PadMode
from ...precision import TRANSFORM_TOLERANCE, Precision
from ...results import Check
from ..base import Prepared, TimedPart, Unsupported
from .checks import verdict
from .context import TorchContext

CHECK_POINTS = 48
TRANSFORM_MARKERS = ("winograd", "fft")  # in cuDNN's kernel names
DILATION = [1, 1]
OUTPUT_PADDING = [0, 0]
GROUPS = 1
# PyTorch does not report the engine cuDNN chose; it records how it asked for one.
CUDNN_INFO = {"library": "cuDNN", "algorithm": "torch.backends.cudnn.benchmark=True: cuDNN's find timed its "
              "algorithms at the warm-up call and the fastest is used (engine id not exposed by PyTorch)",
              "layout": "NCHW"}


def prepare(ctx: TorchContext, kernel: ConvKernel, precision: Precision) -> Prepared:
    if precision in (Precision.INT8, Precision.FP8):
        raise Unsupported(f"PyTorch has no {precision.value} convolution with 32-bit accumulate and output "
                          "(its quantized convolution requantizes to 8 bits); run fp32, fp16 or bf16")
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
        out["dx"] = torch.ops.aten.convolution_backward(dy, x, w, None, stride, pad, DILATION, False,
                                                        OUTPUT_PADDING, GROUPS, [True, False, False])[0]

    def bwd_filter() -> None:
        out["dw"] = torch.ops.aten.convolution_backward(dy, x, w, None, stride, pad, DILATION, False,
                                                        OUTPUT_PADDING, GROUPS, [False, True, False])[1]

    sampler = ConvSampler(ctx, kk, x, w, dy)
    parts = [
        TimedPart("fwd", fwd, lambda: sampler.check_fwd(out["y"], precision), kernel.flops("fwd"),
                  kernel.min_bytes("fwd", precision)),
        TimedPart("bwd_data", bwd_data, lambda: sampler.check_bwd_data(out["dx"], precision),
                  kernel.flops("bwd_data"), kernel.min_bytes("bwd_data", precision)),
        TimedPart("bwd_filter", bwd_filter, lambda: sampler.check_bwd_filter(out["dw"], precision),
                  kernel.flops("bwd_filter"), kernel.min_bytes("bwd_filter", precision)),
    ]
    if ctx.is_cuda:
        for p in parts:
            p.info.update(CUDNN_INFO)
            if precision in TRANSFORM_TOLERANCE:
                p.check = transform_aware(p, precision)
    return Prepared(parts=parts, padding=padded)


def padded_conv(kernel: ConvKernel, precision: Precision, mode: PadMode) -> tuple[ConvKernel, dict[str, int]]:
    """The convolution DeepBench ran (kernels/padding.py: channels, and for int8 the image too)
    and the padded dimensions; the FLOPs a result reports stay the listed kernel's."""
    listed = {"n": kernel.n, "c": kernel.c, "h": kernel.h, "w": kernel.w, "k": kernel.k}
    shape = padding.resolve(mode, listed, padding.conv_shape(kernel.n, kernel.c, kernel.h, kernel.w, kernel.k,
                                                              precision))
    changed = padding.changed(listed, shape)
    return (kernel.model_copy(update=changed) if changed else kernel), changed


def transform_aware(part: TimedPart, precision: Precision) -> Callable[[], Check]:
    """The part's check, and when it fails in a precision with a TRANSFORM_TOLERANCE: the kernels
    the call runs (CUPTI names them; PyTorch does not say which engine cuDNN chose). If cuDNN
    picked a Winograd or FFT algorithm, the check is held to that algorithm family's tolerance."""
    plain = part.check

    def check() -> Check:
        result = plain()
        if result.passed or result.error is None:
            return result
        from ...timing.profiler_check import profiler_kernel_us

        names = profiler_kernel_us(part.run, calls=1)["kernel_names"]
        part.info["kernels"] = names
        if not any(marker in n.lower() for n in names for marker in TRANSFORM_MARKERS):
            return result
        tol = TRANSFORM_TOLERANCE[precision]
        return result.model_copy(update={
            "passed": result.error <= tol, "tolerance": tol,
            "detail": f"{result.detail}; cuDNN ran a transform-domain algorithm ({names[0][:60]}): "
                      f"tolerance {tol:g} for Winograd/FFT in {precision.value}"})
    return check


class ConvSampler:
    """Exact float64 values of randomly chosen output elements, from the definition.

    Each reference element is one gather and one dot product on the device (the taps that
    reach it are worked out on the host), and the outputs are read in one gather: a check
    costs milliseconds, which matters because the cuDNN backend checks every engine it might
    choose (cudnn/conv.py)."""

    def __init__(self, ctx: TorchContext, kk: ConvKernel, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> None:
        self.kk, self.ctx = kk, ctx
        self.xp = F.pad(x.double(), (kk.pad_w, kk.pad_w, kk.pad_h, kk.pad_h))
        self.w, self.dy = w.double(), dy.double()

    def _points(self, *sizes: int) -> list[tuple[int, ...]]:
        cols = [torch.randint(0, s, (CHECK_POINTS,), generator=self.ctx.generator, device=self.ctx.device).tolist()
                for s in sizes]
        return list(zip(*cols, strict=False))

    @staticmethod
    def _at(out: torch.Tensor, points: list[tuple[int, ...]]) -> torch.Tensor:
        """The output's elements at `points`, in one gather."""
        index = torch.tensor(points, device=out.device).t()
        return out[tuple(index)].double()

    def check_fwd(self, y: torch.Tensor, precision: Precision) -> Check:
        kk = self.kk
        points = self._points(kk.n, kk.k, kk.out_h, kk.out_w)
        ref = [(self.xp[n, :, oh * kk.stride_h:oh * kk.stride_h + kk.r, ow * kk.stride_w:ow * kk.stride_w + kk.s]
                * self.w[k]).sum() for n, k, oh, ow in points]
        return _compare(self._at(y, points), ref, precision, "sampled-fp64")

    def check_bwd_filter(self, dw: torch.Tensor, precision: Precision) -> Check:
        kk = self.kk
        points = self._points(kk.k, kk.c, kk.r, kk.s)
        oh_end, ow_end = kk.stride_h * (kk.out_h - 1) + 1, kk.stride_w * (kk.out_w - 1) + 1
        ref = [(self.xp[:, c, r:r + oh_end:kk.stride_h, s:s + ow_end:kk.stride_w] * self.dy[:, k]).sum()
               for k, c, r, s in points]
        return _compare(self._at(dw, points), ref, precision, "sampled-fp64")

    def check_bwd_data(self, dx: torch.Tensor, precision: Precision) -> Check:
        kk = self.kk
        points = self._points(kk.n, kk.c, kk.h, kk.w)
        ref = []
        for n, c, ih, iw in points:
            # the filter taps (r, s) whose output position (oh, ow) reads input (ih, iw)
            taps = [(r, s, (ih + kk.pad_h - r) // kk.stride_h, (iw + kk.pad_w - s) // kk.stride_w)
                    for r in range(kk.r) for s in range(kk.s)
                    if (ih + kk.pad_h - r) % kk.stride_h == 0 and (iw + kk.pad_w - s) % kk.stride_w == 0
                    and 0 <= (ih + kk.pad_h - r) // kk.stride_h < kk.out_h
                    and 0 <= (iw + kk.pad_w - s) // kk.stride_w < kk.out_w]
            if not taps:
                ref.append(torch.zeros((), dtype=torch.float64, device=self.dy.device))
                continue
            rs, ss, ohs, ows = (list(col) for col in zip(*taps, strict=False))
            ref.append((self.dy[n][:, ohs, ows] * self.w[:, c][:, rs, ss]).sum())
        return _compare(self._at(dx, points), ref, precision, "sampled-fp64")


def _compare(got: torch.Tensor, ref: list[torch.Tensor], precision: Precision, method: str) -> Check:
    from .checks import relative_error

    return verdict(relative_error(got, torch.stack(ref)), precision, method, f"{len(ref)} random elements")
