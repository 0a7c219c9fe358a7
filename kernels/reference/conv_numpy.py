"""The three directions of an NCHW convolution checked in float64 numpy at randomly sampled
elements, each recomputed from the definition (a dot product over what that element reads): for
the backends whose outputs are numpy arrays (oneDNN through ctypes), the same rule as the torch
sampler (conv.py) without PyTorch.

forward      y[n, k, oh, ow]  = sum_{c, r, s} xp[n, c, oh*sh + r, ow*sw + s] w[k, c, r, s]
backward-data dx[n, c, ih, iw] = sum over the taps (k, r, s) whose output (oh, ow) reads (ih, iw)
                                 of dy[n, k, oh, ow] w[k, c, r, s]
backward-filter dw[k, c, r, s] = sum_{n, oh, ow} xp[n, c, oh*sh + r, ow*sw + s] dy[n, k, oh, ow]

(xp: the input zero-padded by pad_h, pad_w.) Only the operands one element reads are raised to
float64, so a check of a large layer costs a few slices, not a float64 copy of its tensors.
Integers (int8 forward, an int32 accumulator) must match exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..precision import Precision, tolerance
from ..results import Check
from .numpy_checks import CONV_CHECK_POINTS, relative_error
from .verdicts import integer_verdict, verdict


@dataclass(frozen=True)
class Geometry:
    """A convolution's padding and strides (the sizes come with the arrays)."""

    pad_h: int
    pad_w: int
    stride_h: int
    stride_w: int


def _points(rng: np.random.Generator, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    cols = [rng.integers(0, s, size=CONV_CHECK_POINTS).tolist() for s in shape]
    return list(zip(*cols, strict=True))


def _padded_window(
    x: np.ndarray, n: int | slice, c: int | slice, row0: int, col0: int, g: Geometry, rows: int, cols: int
) -> np.ndarray:
    """xp[n, c, row0 + i*sh, col0 + j*sw] for i < rows, j < cols, in float64 (zeros where xp pads)."""
    h, w = x.shape[2], x.shape[3]
    ih = row0 + np.arange(rows) * g.stride_h - g.pad_h
    iw = col0 + np.arange(cols) * g.stride_w - g.pad_w
    ok_h, ok_w = (ih >= 0) & (ih < h), (iw >= 0) & (iw < w)
    window = x[n, c][..., np.clip(ih, 0, h - 1)[:, None], np.clip(iw, 0, w - 1)[None, :]].astype(np.float64)
    return window * (ok_h[:, None] & ok_w[None, :])


def forward_at(x: np.ndarray, w: np.ndarray, g: Geometry, n: int, k: int, oh: int, ow: int) -> float:
    r, s = w.shape[2], w.shape[3]
    patch = _padded_window(x, n, slice(None), oh * g.stride_h, ow * g.stride_w, _unit(g), r, s)  # (C, R, S)
    return float((patch * w[k].astype(np.float64)).sum())


def _unit(g: Geometry) -> Geometry:
    """The geometry of a filter's own taps (stride 1 within one receptive field)."""
    return Geometry(g.pad_h, g.pad_w, 1, 1)


def backward_data_at(dy: np.ndarray, w: np.ndarray, g: Geometry, n: int, c: int, ih: int, iw: int) -> float:
    out_h, out_w = dy.shape[2], dy.shape[3]
    total = 0.0
    for r in range(w.shape[2]):
        th = ih + g.pad_h - r
        if th < 0 or th % g.stride_h or th // g.stride_h >= out_h:
            continue
        for s in range(w.shape[3]):
            tw = iw + g.pad_w - s
            if tw < 0 or tw % g.stride_w or tw // g.stride_w >= out_w:
                continue
            grad = dy[n, :, th // g.stride_h, tw // g.stride_w].astype(np.float64)
            total += float(grad @ w[:, c, r, s].astype(np.float64))
    return total


def backward_filter_at(x: np.ndarray, dy: np.ndarray, g: Geometry, k: int, c: int, r: int, s: int) -> float:
    out_h, out_w = dy.shape[2], dy.shape[3]
    window = _padded_window(x, slice(None), c, r, s, g, out_h, out_w)  # (N, OH, OW)
    return float((window * dy[:, k].astype(np.float64)).sum())


def _verdict(got: list[float], ref: list[float], precision: Precision, reduction: int, tol: float | None) -> Check:
    g, r = np.array(got, dtype=np.float64), np.array(ref, dtype=np.float64)
    if precision is Precision.INT8:
        wrong = int((g != r).sum()) if np.isfinite(g).all() else len(g)
        return integer_verdict(wrong, "sampled-exact-int", f"{wrong} of {len(g)} random elements wrong")
    bound = tolerance(precision, reduction=reduction) if tol is None else tol
    return verdict(relative_error(g, r), precision, "sampled-fp64", f"{len(g)} random elements", tol=bound)


def check_forward(
    y: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    g: Geometry,
    precision: Precision,
    rng: np.random.Generator,
    tol: float | None = None,
) -> Check:
    """y (N, K, OH, OW) against the definition (`tol`: the precision's, over the reduction C*R*S, unless given)."""
    points = _points(rng, y.shape)
    ref = [forward_at(x, w, g, *p) for p in points]
    return _verdict([float(y[p]) for p in points], ref, precision, w[0].size, tol)


def check_backward_data(
    dx: np.ndarray,
    dy: np.ndarray,
    w: np.ndarray,
    g: Geometry,
    precision: Precision,
    rng: np.random.Generator,
    tol: float | None = None,
) -> Check:
    """dx (N, C, H, W) against the definition (reduction K*R*S)."""
    points = _points(rng, dx.shape)
    ref = [backward_data_at(dy, w, g, *p) for p in points]
    return _verdict([float(dx[p]) for p in points], ref, precision, w.shape[0] * w.shape[2] * w.shape[3], tol)


def check_backward_filter(
    dw: np.ndarray,
    x: np.ndarray,
    dy: np.ndarray,
    g: Geometry,
    precision: Precision,
    rng: np.random.Generator,
    tol: float | None = None,
) -> Check:
    """dw (K, C, R, S) against the definition (reduction N*OH*OW)."""
    points = _points(rng, dw.shape)
    ref = [backward_filter_at(x, dy, g, *p) for p in points]
    return _verdict([float(dw[p]) for p in points], ref, precision, dy.shape[0] * dy.shape[2] * dy.shape[3], tol)
