"""The convolution DeepBench ran, and its float64 checks: output elements sampled at random and
recomputed exactly from the definition (a dot product over the receptive field).

Here, apart from every backend, because the PyTorch backend (cuDNN or oneDNN through ATen) and
the cuDNN backend (cuDNN's graph API) run the same problems and are held to the same reference: a
reference inside one backend would change with it, and could share the blind spot of the library
it checks. Nothing here calls a convolution library."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from .. import padding
from ..catalog import ConvKernel
from ..padding import PadMode
from ..precision import TRANSFORM_TOLERANCE, Precision
from ..results import Check
from .context import TensorSource
from .torch_checks import relative_error, verdict

CHECK_POINTS = 48
MAX_GATHER_BYTES = 256 << 20  # float64 operands a check gathers at once (ConvSampler)
FLOAT64_BYTES = 8
TRANSFORM_MARKERS = ("winograd", "fft")  # in cuDNN's kernel names


class CheckedCall(Protocol):
    """What `transform_aware` reads of a timed part (kernels/backends/contract/base.py TimedPart is one)."""

    @property
    def run(self) -> Callable[[], object]: ...

    @property
    def check(self) -> Callable[[], Check]: ...

    @property
    def info(self) -> dict[str, Any]: ...


def padded_conv(kernel: ConvKernel, precision: Precision, mode: PadMode) -> tuple[ConvKernel, dict[str, int]]:
    """The convolution DeepBench ran (kernels/padding.py: channels, and for int8 the image too)
    and the padded dimensions; the FLOPs a result reports stay the listed kernel's."""
    listed = {"n": kernel.n, "c": kernel.c, "h": kernel.h, "w": kernel.w, "k": kernel.k}
    shape = padding.resolve(
        mode, listed, padding.conv_shape(kernel.n, kernel.c, kernel.h, kernel.w, kernel.k, precision)
    )
    changed = padding.changed(listed, shape)
    return (kernel.model_copy(update=changed) if changed else kernel), changed


def transform_aware(part: CheckedCall, precision: Precision) -> Callable[[], Check]:
    """The part's check, and when it fails in a precision with a TRANSFORM_TOLERANCE: the kernels
    the call runs (CUPTI names them; PyTorch does not say which engine cuDNN chose). If cuDNN
    picked a Winograd or FFT algorithm, the check is held to that algorithm family's tolerance."""
    plain = part.check

    def check() -> Check:
        result = plain()
        if result.passed or result.error is None:
            return result
        from ..timing.profiler_check import profiler_kernel_us

        names = profiler_kernel_us(part.run, calls=1)["kernel_names"]
        part.info["kernels"] = names
        if not any(marker in n.lower() for n in names for marker in TRANSFORM_MARKERS):
            return result
        tol = TRANSFORM_TOLERANCE[precision]
        return result.model_copy(
            update={
                "passed": result.error <= tol,
                "tolerance": tol,
                "detail": f"{result.detail}; cuDNN ran a transform-domain algorithm ({names[0][:60]}): "
                f"tolerance {tol:g} for Winograd/FFT in {precision.value}",
            }
        )

    return check


class ConvSampler:
    """Exact float64 values of randomly chosen output elements, from the definition.

    The reference elements of a check are gathered and reduced together on the device (the
    operands every sampled element reads, in float64, a chunk of elements at a time): a check
    costs a few kernels, which matters because the cuDNN backend checks every engine it might
    choose (backends/cudnn/conv.py). Reduced one element at a time, with the filter taps of a backward-data
    element worked out on the host, a check took 6-18 ms (a profile of train's first 72 directions on
    an H100: 25 ms of checks a direction; tests/benchmarks/results/train-profile-h100/)."""

    def __init__(self, ctx: TensorSource, kk: ConvKernel, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> None:
        self.kk, self.ctx = kk, ctx
        self.xp = F.pad(x.double(), (kk.pad_w, kk.pad_w, kk.pad_h, kk.pad_h))
        self.w, self.dy = w.double(), dy.double()

    def _points(self, *sizes: int) -> torch.Tensor:
        """CHECK_POINTS random output coordinates: one row of indices per dimension."""
        return torch.stack(
            [torch.randint(0, s, (CHECK_POINTS,), generator=self.ctx.generator, device=self.ctx.device) for s in sizes]
        ).to(self.xp.device)

    def _range(self, n: int) -> torch.Tensor:
        return torch.arange(n, device=self.xp.device)

    @staticmethod
    def _at(out: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        """The output's elements at `points`, in one gather."""
        return out[tuple(points)].double()

    def check_fwd(self, y: torch.Tensor, precision: Precision) -> Check:
        kk = self.kk
        points = self._points(kk.n, kk.k, kk.out_h, kk.out_w)

        def ref(n: torch.Tensor, k: torch.Tensor, oh: torch.Tensor, ow: torch.Tensor) -> torch.Tensor:
            rows = (oh * kk.stride_h)[:, None] + self._range(kk.r)  # (P, R): the input rows each element reads
            cols = (ow * kk.stride_w)[:, None] + self._range(kk.s)
            patch = self.xp[
                n[:, None, None, None],
                self._range(kk.c)[None, :, None, None],
                rows[:, None, :, None],
                cols[:, None, None, :],
            ]
            return (patch * self.w[k]).sum(dim=(1, 2, 3))

        return _compare(self._at(y, points), _chunked(points, 2 * kk.c * kk.r * kk.s, ref), precision)

    def check_bwd_filter(self, dw: torch.Tensor, precision: Precision) -> Check:
        kk = self.kk
        points = self._points(kk.k, kk.c, kk.r, kk.s)

        def ref(k: torch.Tensor, c: torch.Tensor, r: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            rows = r[:, None] + self._range(kk.out_h) * kk.stride_h  # (P, OH): the input rows each tap reads
            cols = s[:, None] + self._range(kk.out_w) * kk.stride_w
            x = self.xp[
                self._range(kk.n)[None, :, None, None],
                c[:, None, None, None],
                rows[:, None, :, None],
                cols[:, None, None, :],
            ]
            return (x * self.dy[:, k].transpose(0, 1)).sum(dim=(1, 2, 3))

        return _compare(self._at(dw, points), _chunked(points, 2 * kk.n * kk.out_h * kk.out_w, ref), precision)

    def check_bwd_data(self, dx: torch.Tensor, precision: Precision) -> Check:
        kk = self.kk
        points = self._points(kk.n, kk.c, kk.h, kk.w)

        def ref(n: torch.Tensor, c: torch.Tensor, ih: torch.Tensor, iw: torch.Tensor) -> torch.Tensor:
            # the filter taps (r, s) whose output position (oh, ow) reads input (ih, iw)
            r, s = self._range(kk.r), self._range(kk.s)
            th = ih[:, None] + kk.pad_h - r  # (P, R)
            tw = iw[:, None] + kk.pad_w - s
            rows_ok = (th % kk.stride_h == 0) & (th >= 0) & (th // kk.stride_h < kk.out_h)
            cols_ok = (tw % kk.stride_w == 0) & (tw >= 0) & (tw // kk.stride_w < kk.out_w)
            oh, ow = (th // kk.stride_h).clamp(0, kk.out_h - 1), (tw // kk.stride_w).clamp(0, kk.out_w - 1)
            ks = self._range(kk.k)[None, :, None, None]
            grad = self.dy[n[:, None, None, None], ks, oh[:, None, :, None], ow[:, None, None, :]]  # (P, K, R, S)
            taps = self.w[ks, c[:, None, None, None], r[None, None, :, None], s[None, None, None, :]]
            valid = (rows_ok[:, :, None] & cols_ok[:, None, :])[:, None]
            return (grad * taps * valid).sum(dim=(1, 2, 3))

        return _compare(self._at(dx, points), _chunked(points, 3 * kk.k * kk.r * kk.s, ref), precision)


def _chunked(
    points: torch.Tensor,
    doubles_per_point: int,
    ref: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """`ref` of the points (a row of indices per dimension), at most MAX_GATHER_BYTES of float64
    operands gathered at a time: a backward-filter point reads a whole batch of images."""
    step = max(1, MAX_GATHER_BYTES // (FLOAT64_BYTES * max(1, doubles_per_point)))
    return torch.cat([ref(*points[:, i : i + step]) for i in range(0, points.shape[1], step)])


def _compare(got: torch.Tensor, ref: torch.Tensor, precision: Precision) -> Check:
    return verdict(relative_error(got, ref), precision, "sampled-fp64", f"{len(ref)} random elements")
