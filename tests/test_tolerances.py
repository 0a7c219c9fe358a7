"""Check tolerances follow from the precision, the reduction and the recurrence (issue 21, case 9):
the RNN case that failed a fixed fp16 tolerance on another H100 passes with margin; every check
error of the published H100/H200 runs stays well inside its derived tolerance; correct RNNs
measured here over several seeds do too; and fp32's tolerance still rejects half-precision
arithmetic."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from deepbench.kernels.precision import (
    ACCUMULATOR_ROUNDOFF,
    PRECISIONS,
    TOLERANCE,
    Precision,
    recurrence_tolerance,
    tolerance,
)
from deepbench.kernels.results_file import read_bytes

from .conftest import REPO

PUBLISHED = REPO / "runner" / "published"
# The least margin (tolerance / error) a correct computation must keep. The largest error ever seen
# (below) is 1.37 expected errors; MARGIN 4 leaves it 2.9x.
LEAST_MARGIN = 2.5
# rnn/train/000 and 008 fp16 on a second H100: vanilla, hidden 1760 and 2560, batch 16, 50 steps,
# backward errors 0.00536 and 0.00539 against the fixed 0.005 (the run of the same code here passed).
SEEN_ON_ANOTHER_H100 = [(1760, 16, 50, 0.00536), (2560, 16, 50, 0.00539)]


@pytest.mark.parametrize("hidden, batch, steps, error", SEEN_ON_ANOTHER_H100)
def test_the_rnn_that_failed_on_another_machine_passes_with_margin(
    hidden: int, batch: int, steps: int, error: float
) -> None:
    tol = recurrence_tolerance(Precision.FP16, hidden, batch, steps, "bwd")
    assert error > TOLERANCE[Precision.FP16]  # what failed it
    assert tol / error >= LEAST_MARGIN, tol


def _published_checks():
    for path in sorted(PUBLISHED.glob("*/*/results.jsonl.gz")):
        for line in read_bytes(path).decode().splitlines():
            r = json.loads(line)
            for part in r.get("parts", ()):
                check = part["check"]
                if check["error"] is not None and check["method"] in ("reference-fp64", "freivalds"):
                    yield path.parent.parent.name, r, part["direction"], check["error"]


def test_published_gpu_errors_stay_inside_the_derived_tolerances() -> None:
    """Every GEMM, sparse GEMM and RNN check of the committed H100/H200 runs (cuBLAS, cuSPARSE,
    cuDNN): error at most 1/LEAST_MARGIN of the tolerance derived for its kernel now."""
    seen = 0
    for device, r, direction, error in _published_checks():
        p, k = Precision(r["precision"]["name"]), r["kernel"]
        if r["op"] == "rnn":
            tol = recurrence_tolerance(p, k["hidden"], k["batch"], k["timesteps"], direction)
        elif r["op"] in ("gemm", "sparse_gemm"):
            tol = tolerance(p, reduction=k["k"])
        else:
            continue
        seen += 1
        assert error * LEAST_MARGIN <= tol, (device, r["id"], direction, error, tol)
    assert seen > 1000


def test_measured_rnn_errors_keep_their_margin() -> None:
    """Correct RNNs (vanilla, LSTM, GRU; fp16, bf16, fp32; 1 to 50 steps; 3 seeds) computed by the
    CPU backend: errors within the model's expectation and far inside the tolerance
    (tests/benchmarks/rnn_tolerance.py measures the larger grid in docs/tolerances.md)."""
    from tests.benchmarks.rnn_tolerance import QUICK, errors, expected

    for name in QUICK["precisions"]:
        p = Precision(name)
        for cell in QUICK["cells"]:
            for steps in QUICK["steps"]:
                hidden, batch = QUICK["hidden"][0], QUICK["batch"][0]
                for direction, err in errors(p, cell, hidden, batch, steps, QUICK["seeds"]).items():
                    tol = recurrence_tolerance(p, hidden, batch, steps, direction)
                    assert err <= expected(p, hidden, batch, steps, direction), (name, cell, steps, direction, err)
                    assert err * LEAST_MARGIN <= tol, (name, cell, steps, direction, err, tol)


def test_fp32_tolerance_rejects_half_precision_arithmetic() -> None:
    """The same recurrence computed in fp16 misses fp32's tolerance: a library computing in half
    precision while claiming fp32 fails its check."""
    from tests.benchmarks.rnn_tolerance import errors

    for cell in ("vanilla", "lstm"):
        half = errors(Precision.FP16, cell, 64, 4, 10, 1)
        for direction, err in half.items():
            assert err > 2 * recurrence_tolerance(Precision.FP32, 64, 4, 10, direction), (cell, direction, err)


def test_tolerance_grows_as_the_model_says() -> None:
    u16 = 2.0**-11
    assert tolerance(Precision.INT8, 10**6, 100) == 0.0
    assert tolerance(Precision.FP16) == TOLERANCE[Precision.FP16]  # the floor for short work
    bwd = [recurrence_tolerance(Precision.FP16, 1024, 16, t, "bwd") for t in (50, 200, 800)]
    assert bwd[0] < bwd[1] < bwd[2]
    assert bwd[2] == pytest.approx(4 * (u16 * (1 + math.sqrt(800)) + 2.0**-24 * math.sqrt(16 * 800)))


def _fp16_accumulated(a: np.ndarray, b: np.ndarray, terms: int | None = None) -> np.ndarray:
    """a @ b as fp16acc16 computes it: each product of two float16 numbers exact (float64 holds it),
    added one k-term at a time to a float16 accumulator, rounded to float16 after every addition
    (recursive summation, the slowest-growing error a blocked tensor-core sum can beat, never lose
    to). `terms`: sum only the first so many k-terms (a kernel that skipped part of the reduction)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    for i in range(a.shape[1] if terms is None else terms):
        acc = (acc.astype(np.float64) + np.outer(wide_a[:, i], wide_b[i])).astype(np.float16)
    return acc


def _relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("k", [16, 256, 2048, 8192])
def test_fp16acc16_tolerance_holds_a_real_fp16_accumulated_product_and_rejects_a_wrong_one(k: int) -> None:
    """Emulated fp16-accumulate GEMMs on random normal inputs stay inside fp16acc16's tolerance with
    the margin every precision keeps, over several seeds; the same products summed in float16 fail
    fp16's (fp32-accumulate) tolerance at long reductions, so the accumulate type is what decides;
    a product that skipped half the reduction or read B's rows in the wrong order fails fp16acc16's."""
    tol = tolerance(Precision.FP16ACC16, reduction=k)
    assert tol == pytest.approx(max(TOLERANCE[Precision.FP16ACC16], 4 * 2.0**-11 * (1 + math.sqrt(k))))
    for seed in range(5):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((16, k)).astype(np.float16)
        b = rng.standard_normal((k, 16)).astype(np.float16)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        error = _relative_error(_fp16_accumulated(a, b), ref)
        assert error * LEAST_MARGIN <= tol, (seed, error, tol)
        if k >= 2048:
            assert error > tolerance(Precision.FP16, reduction=k)  # fp32 accumulate would not lose this much
        assert _relative_error(_fp16_accumulated(a, b, terms=k // 2), ref) > tol
        assert _relative_error(_fp16_accumulated(a, b[rng.permutation(k)]), ref) > tol


def test_the_accumulator_roundoff_follows_the_recorded_accumulate_type() -> None:
    """tolerance() takes the accumulator's round-off from the accumulate type PRECISIONS records, for
    every precision (none is a special case): float16 for fp16acc16, float32 for the other floats."""
    for precision, info in PRECISIONS.items():
        assert info.accumulate in ACCUMULATOR_ROUNDOFF, precision
    assert PRECISIONS[Precision.FP16ACC16].accumulate == "float16"
    long_k = 1 << 20
    assert tolerance(Precision.FP16ACC16, long_k) / tolerance(Precision.FP16, long_k) > 10
