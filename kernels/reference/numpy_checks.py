"""Correctness checks in float64 numpy, for the backends that hand back numpy arrays
(onnxruntime, TFLite): the same rules as the torch tensors' checks (torch_checks.py).

The error is ||out - ref||_F / ||ref||_F; NaN or Inf anywhere fails. Large GEMMs use Freivalds'
randomized check (out @ r against A @ (B @ r) for a few random vectors), O(n^2) instead of
O(n^3), which catches any wrong block with high probability. Convolutions are checked at random
output points recomputed from the definition. Integer results must match exactly."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..precision import Precision, tolerance
from ..results import Check
from .verdicts import FREIVALDS_VECTORS, REFERENCE_MAX_MACS, integer_verdict, verdict

CONV_CHECK_POINTS = 48


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    out64, ref64 = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if not np.isfinite(out64).all():
        return math.nan
    denom = float(np.linalg.norm(ref64))
    num = float(np.linalg.norm(out64 - ref64))
    return num / denom if denom > 0 else num


def check_matmul(
    out: np.ndarray, x: np.ndarray, y: np.ndarray, precision: Precision, rng: np.random.Generator
) -> Check:
    """out should equal x @ y (x: n x k, y: k x m). Integer results must match exactly."""
    n, k = x.shape
    m = y.shape[1]
    small = n * k * m <= REFERENCE_MAX_MACS
    if precision is Precision.INT8:
        if small:
            # float64 BLAS is exact here: |x @ y| <= k * 128 * 128 < 2**53.
            ref = x.astype(np.float64) @ y.astype(np.float64)
            wrong = int((out.astype(np.float64) != ref).sum())
            return integer_verdict(wrong, "exact-int", f"{wrong} wrong elements")
        # Freivalds with small integer vectors, in float64: every sum stays below 2**53, so exact.
        r = rng.integers(-2, 3, size=(m, FREIVALDS_VECTORS)).astype(np.float64)
        lhs = out.astype(np.float64) @ r
        rhs = x.astype(np.float64) @ (y.astype(np.float64) @ r)
        wrong = int((lhs != rhs).sum())
        return integer_verdict(wrong, "freivalds-exact")
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    tol = tolerance(precision, reduction=k)
    if small:
        return verdict(relative_error(out, x64 @ y64), precision, "reference-fp64", tol=tol)
    r = rng.standard_normal((m, FREIVALDS_VECTORS))
    return verdict(relative_error(np.asarray(out, np.float64) @ r, x64 @ (y64 @ r)), precision, "freivalds", tol=tol)


def check_batch_ends(check_entry: Callable[[int], Check], batch: int) -> Check:
    """A batched operation checked at its first and last entry (a library that skipped or mixed
    up entries fails); the worse of the two is reported, naming the entries."""
    entries = sorted({0, batch - 1})
    worst = max((check_entry(i) for i in entries), key=lambda c: (not c.passed, c.error or 0.0))
    return worst.model_copy(update={"detail": f"batch entries {entries} {worst.detail}".strip()})


def check_batched_matmul(
    out: np.ndarray, x: np.ndarray, y: np.ndarray, precision: Precision, rng: np.random.Generator
) -> Check:
    """out[i] should equal x[i] @ y[i] (check_batch_ends)."""
    return check_batch_ends(lambda i: check_matmul(out[i], x[i], y[i], precision, rng), len(out))


def conv_points(rng: np.random.Generator, n: int, k: int, oh: int, ow: int) -> list[tuple[int, int, int, int]]:
    """CONV_CHECK_POINTS random output positions (n, k, oh, ow) of an (N, K, OH, OW) output."""
    cols = [rng.integers(0, s, size=CONV_CHECK_POINTS).tolist() for s in (n, k, oh, ow)]
    return list(zip(*cols, strict=True))


def conv_reference_at(
    x_padded: np.ndarray, w: np.ndarray, n: int, k: int, oh: int, ow: int, stride_h: int, stride_w: int
) -> float:
    """One output of an NCHW convolution (cross-correlation) from its definition, in float64:
    x_padded (N, C, H+2p, W+2p), w (K, C, R, S)."""
    r, s = w.shape[2], w.shape[3]
    h0, w0 = oh * stride_h, ow * stride_w
    patch = x_padded[n, :, h0 : h0 + r, w0 : w0 + s].astype(np.float64)
    return float((patch * w[k].astype(np.float64)).sum())


def check_conv_nchw(
    y: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    pad_h: int,
    pad_w: int,
    stride_h: int,
    stride_w: int,
    precision: Precision,
    rng: np.random.Generator,
    bias: np.ndarray | None = None,
) -> Check:
    """y (N, K, OH, OW) at random points against the definition (plus bias[k] when given).
    int8: exact integers."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad_h, pad_h), (pad_w, pad_w)))
    got, ref = [], []
    for n, k, oh, ow in conv_points(rng, *y.shape):
        shift = float(bias[k]) if bias is not None else 0.0
        ref.append(conv_reference_at(xp, w, n, k, oh, ow, stride_h, stride_w) + shift)
        got.append(float(y[n, k, oh, ow]))
    return compare_points(np.array(got), np.array(ref), precision)


def compare_points(got: np.ndarray, ref: np.ndarray, precision: Precision) -> Check:
    if precision is Precision.INT8:
        wrong = int((got != ref).sum()) if np.isfinite(got).all() else len(got)
        return integer_verdict(wrong, "sampled-exact-int", f"{wrong} of {len(got)} random elements wrong")
    return verdict(relative_error(got, ref), precision, "sampled-fp64", f"{len(got)} random elements")


def accumulator_rows(x: np.ndarray, w: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The exact accumulator of `rows` of x @ w.T (an integer GEMM's int32 sums, in float64: exact below 2^53)."""
    return x[rows].astype(np.float64) @ w.T.astype(np.float64)


def check_requantized(out_q: np.ndarray, acc: np.ndarray, scale: float, zero_point: int, qmin: int, qmax: int) -> Check:
    """An integer output that the runtime requantized from its int32 accumulator `acc` with the
    multiplier `scale`. The exact value is v = acc * scale + zero_point; a requantization rounds v
    to one of its two integer neighbours and saturates at [qmin, qmax], and which neighbour
    depends on the implementation: round half away from zero or half up, TFLite's two fixed-point
    roundings (a rounding doubling high multiply by 2^30, then a rounding shift: 102399 * 2^-13 =
    12.49988 comes out 13), ruy's truncating multiply then rounding shift, XNNPACK's float32
    round-half-to-even. So each output must lie in [clamp(floor(v)), clamp(ceil(v))]: under one
    output step from v, the rounding's whole freedom and nothing more. XNNPACK's "fp32"
    requantization converts the accumulator to float32 first (inexact above 2^24), which adds
    nothing with the power-of-two scales 2^-e the backends use: the boundaries between outputs,
    acc = n * 2^e, are float32 numbers for every unsaturated n, so rounding acc to float32 never
    crosses one. An output a step or more beyond its exact value's neighbours fails (below one
    step an int8 output cannot show an accumulator error). `saturated` counts the outputs whose
    nearest integer lies outside [qmin, qmax], which saturation must clamp to the bound."""
    exact = acc.astype(np.float64) * scale + zero_point
    low = np.clip(np.floor(exact), qmin, qmax)
    high = np.clip(np.ceil(exact), qmin, qmax)
    got = out_q.astype(np.float64)
    outside = (got < low) | (got > high)
    wrong = int(outside.sum())
    nearest = np.rint(exact)
    saturated = int(((nearest < qmin) | (nearest > qmax)).sum())
    other_neighbour = int(((got != np.clip(nearest, qmin, qmax)) & ~outside).sum())
    return integer_verdict(
        wrong,
        "requantized-int",
        f"{wrong} of {out_q.size} outside the rounding of the exact value; {other_neighbour} "
        f"rounded to the other neighbour; {saturated} saturated",
    )
