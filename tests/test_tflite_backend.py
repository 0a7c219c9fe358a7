"""The TFLite backend (LiteRT) and its model generator against the real interpreter, in the main
environment (numpy 2), as in the ARM image."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.backends import load_backend
from deepbench.kernels.backends.contract.base import Unsupported
from deepbench.kernels.backends.tflite import flatbuffer as F
from deepbench.kernels.backends.tflite.context import LoadedModel
from deepbench.kernels.backends.tflite.flatbuffer import schema as S
from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import RunRecord, Settings, Status
from deepbench.kernels.results_file import read_results

from .conftest import run_cli

SMALL = [
    "gemm/inference_device/003",
    "gemm/inference_device/007",
    "conv/inference_device/012",
    "conv/inference_device/003",
    "rnn/inference_device/001",
    "rnn/inference_device/002",
]


@pytest.fixture(scope="module")
def backend():
    return load_backend("tflite", Settings(threads=1))


@pytest.mark.parametrize("xnnpack", [True, False])
def test_generated_model_loads_and_computes(xnnpack: bool) -> None:
    """The generator's flatbuffer against the runtime: shapes, constants and the operator."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 8), dtype=np.float32)
    w = rng.standard_normal((5, 8), dtype=np.float32)
    spec = F.ModelSpec(
        tensors=[
            F.TensorSpec("x", (3, 8), np.float32),
            F.TensorSpec("w", (5, 8), np.float32, data=w),
            F.TensorSpec("y", (3, 5), np.float32),
        ],
        op=F.OpSpec(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, F.NO_TENSOR], [2], S.FullyConnectedOptionsT()),
        inputs=[0],
        outputs=[2],
    )
    model = LoadedModel(F.build(spec), threads=1, use_xnnpack=xnnpack)
    details = model.interp.get_input_details()[0], model.interp.get_output_details()[0]
    assert tuple(details[0]["shape"]) == (3, 8) and tuple(details[1]["shape"]) == (3, 5)
    model.set_inputs(x)
    model.invoke()
    np.testing.assert_allclose(model.output(), x @ w.T, rtol=1e-5, atol=1e-5)
    assert model.delegated() is xnnpack


def test_int8_fully_connected_cannot_output_int32() -> None:
    """Why int8 results are requantized to int8: TFLite rejects an int32 output."""
    unit = F.Quant([1.0], [0])
    w = np.ones((4, 8), dtype=np.int8)
    spec = F.ModelSpec(
        tensors=[
            F.TensorSpec("x", (2, 8), np.int8, quant=unit),
            F.TensorSpec("w", (4, 8), np.int8, data=w, quant=unit),
            F.TensorSpec("y", (2, 4), np.int32, quant=unit),
        ],
        op=F.OpSpec(S.BuiltinOperator.FULLY_CONNECTED, [0, 1, F.NO_TENSOR], [2], S.FullyConnectedOptionsT(), version=4),
        inputs=[0],
        outputs=[2],
    )
    with pytest.raises(RuntimeError, match="kTfLiteInt8"):
        LoadedModel(F.build(spec), threads=1, use_xnnpack=False)


@pytest.mark.parametrize("kid", SMALL)
@pytest.mark.parametrize("precision", [Precision.FP32, Precision.INT8])
def test_small_kernels_pass_their_checks(backend, kid: str, precision: Precision) -> None:
    kernel = by_id()[kid]
    if kernel.op == "rnn" and precision is Precision.INT8:
        with pytest.raises(Unsupported, match="requantize"):
            backend.prepare(kernel, precision)
        return
    prepared = backend.prepare(kernel, precision)
    assert [p.direction for p in prepared.parts] == ["fwd"]
    part = prepared.parts[0]
    part.run()
    part.run()
    check = part.check()
    assert check.passed, check
    if precision is Precision.INT8:
        assert check.method == "requantized-int" and check.detail.startswith("0 of ")


def test_sparse_weights_run_sparse_and_are_checked(backend) -> None:
    kernel = by_id()["sparse_gemm/inference_device/000"]
    prepared = backend.prepare(kernel, Precision.FP32)
    part = prepared.parts[0]
    part.run()
    assert part.check().passed
    assert part.info["nnz"] < 0.15 * kernel.m * kernel.k  # only the non-zeros are in the model
    assert part.info["model_bytes"] < 4 * kernel.m * kernel.k * 0.3
    with pytest.raises(Unsupported):
        backend.prepare(kernel, Precision.INT8)


ROUNDINGS = {  # what a requantization may do with v = acc * 2^-e: each of them must pass
    "half-even": np.rint,
    "half-away": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5),
    "half-up": lambda v: np.floor(v + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("rounding", list(ROUNDINGS))
def test_every_requantization_rounding_passes_and_one_more_step_fails(seed: int, rounding: str) -> None:
    from deepbench.kernels.reference.numpy_checks import check_requantized

    rng = np.random.default_rng(seed)
    shift = int(rng.integers(4, 12))
    acc = rng.integers(-200 << shift, 200 << shift, size=4000).astype(np.int64)
    acc[:50] = (rng.integers(-100, 100, size=50) << shift) + (1 << (shift - 1))  # exact ties
    real = acc / 2.0**shift
    out = np.clip(ROUNDINGS[rounding](real), -128, 127)
    check = check_requantized(out.astype(np.int8), acc, 2.0**-shift, 0, -128, 127)
    assert check.passed, check
    saturated = int(((np.rint(real) < -128) | (np.rint(real) > 127)).sum())
    assert check.detail.endswith(f"; {saturated} saturated") and saturated > 0
    # One element a step past the other neighbour (not at a bound) fails, and only it is counted.
    inside = np.flatnonzero((real > -120) & (real < 120) & (real != np.round(real)))
    bad = out.copy()
    bad[inside[0]] = np.ceil(real[inside[0]]) + 1
    assert check_requantized(bad.astype(np.int8), acc, 2.0**-shift, 0, -128, 127).error == 1.0
    bad[inside[1]] = np.floor(real[inside[1]]) - 1
    assert check_requantized(bad.astype(np.int8), acc, 2.0**-shift, 0, -128, 127).error == 2.0
    # A saturated element must hold the bound.
    high = np.flatnonzero(real > 128)[0]
    bad = out.copy()
    bad[high] = 126
    assert not check_requantized(bad.astype(np.int8), acc, 2.0**-shift, 0, -128, 127).passed


def test_xnnpack_still_misreads_sparse_weights() -> None:
    """Why the sparse model keeps XNNPACK off: the delegate takes the sparse FULLY_CONNECTED and
    computes garbage. When a LiteRT release fixes it, this fails: turn XNNPACK on for sparse_gemm."""
    from deepbench.kernels.backends.tflite.context import TfliteContext
    from deepbench.kernels.backends.tflite.gemm import fc_model
    from deepbench.kernels.backends.tflite.sparse_gemm import csr

    ctx = TfliteContext(threads=1, seed=3)
    a = ctx.random((64, 128), Precision.FP32)
    a[ctx.rng.random(a.shape) < 0.9] = 0.0
    sparsity, values = csr(a)
    x = ctx.random((4, 128), Precision.FP32)
    outs = {}
    for xnnpack in (False, True):
        spec = fc_model((4, 128), a, Precision.FP32, sparsity=sparsity, w_data=values)
        model = ctx.interpreter(spec, xnnpack=xnnpack)
        model.set_inputs(x)
        model.invoke()
        outs[xnnpack] = (model.delegated(), model.output().copy())
    assert outs[False][0] is False and np.allclose(outs[False][1], x @ a.T, rtol=1e-5, atol=1e-5)
    assert outs[True][0] is True and not np.allclose(outs[True][1], x @ a.T, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("seed", range(3))
def test_int8_weights_keep_tflites_symmetric_range(seed: int) -> None:
    """int8 weights never hold -128 (TFLite's ARM kernels add product pairs in int16, and two
    (-128)(-128) products overflow it); activations use the full range."""
    from deepbench.kernels.backends.tflite.context import TfliteContext

    ctx = TfliteContext(threads=1, seed=seed)
    w, x = ctx.weights((512, 512), Precision.INT8), ctx.random((512, 512), Precision.INT8)
    assert w.min() == -127 and w.max() == 127
    assert x.min() == -128 and x.max() == 127


def test_a_wrong_accumulator_fails_the_int8_check() -> None:
    from deepbench.kernels.reference.numpy_checks import check_requantized

    acc = np.arange(-2000, 2000, 7, dtype=np.float64)
    out = np.clip(np.rint(acc / 64), -128, 127).astype(np.int8)
    assert check_requantized(out, acc, 1 / 64, 0, -128, 127).passed
    assert not check_requantized(out, acc + 128, 1 / 64, 0, -128, 127).passed  # two output steps off


def test_gru_is_unsupported(backend) -> None:
    gru = next(k for k in by_id().values() if k.op == "rnn" and k.cell == "gru")
    with pytest.raises(Unsupported, match="GRU"):
        backend.prepare(gru, Precision.FP32)


@pytest.mark.slow
def test_device_suite_runs_locally(tmp_path: Path) -> None:
    out = tmp_path / "tfl"
    proc = run_cli(
        str(Path(sys.executable).parent / "deepbench-run"),
        "--local",
        "--suite",
        "inference-device",
        "--backend",
        "tflite",
        "--precision",
        "fp32,int8",
        "--ops",
        "gemm,conv",
        "--where",
        "k<=128",
        "--fast",
        "--time-cap",
        "0.05",
        "--threads",
        "1",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    results = read_results(out / "results.jsonl")
    assert results
    assert all(r.status is Status.OK and r.check.passed for r in results), [(r.id, r.reason) for r in results]
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.backend == "tflite"
    assert record.software["ai_edge_litert"] == importlib.metadata.version("ai-edge-litert")
    assert record.device["runtime"].startswith("LiteRT ") and record.device["xnnpack_delegate"] is True
    assert record.device["threads"] == 1


# Layer benchmarks (kernels/layers.py): one small kernel per family and variant.
def _layer_kernels() -> dict:
    from deepbench.kernels import layers as L

    common = {"set": "model", "index": 0}
    return {
        "pooling-max-same": L.PoolingKernel(
            **common, mode="max", n=2, c=3, h=12, w=12, r=3, s=3, pad_h=1, pad_w=1, stride_h=1, stride_w=1
        ),
        "pooling-global": L.PoolingKernel(
            **common, mode="avg", n=2, c=4, h=7, w=7, r=7, s=7, pad_h=0, pad_w=0, stride_h=1, stride_w=1
        ),
        "softmax": L.SoftmaxKernel(**common, rows=6, cols=100),
        **{
            f"activation-{f}": L.ActivationKernel(**common, function=f, elements=1000)
            for f in ("relu", "gelu", "gelu_tanh", "tanh", "sigmoid")
        },
        "embedding": L.EmbeddingKernel(**common, vocab=1000, dim=32, lookups=50),
        "elementwise-add": L.ElementwiseKernel(**common, function="add", elements=600, a_elements=600, b_elements=600),
        "elementwise-mul-broadcast": L.ElementwiseKernel(
            **common, function="mul", elements=600, a_elements=600, b_elements=20
        ),
        "batched_gemm": L.BatchedGemmKernel(**common, batch=3, m=16, n=8, k=24, a_t=True, b_t=False),
    }


# What TFLite has no single builtin operator for, and the words its reason must contain.
LAYER_UNSUPPORTED = {
    "batch_norm": ("BatchNormKernel", {"n": 2, "c": 4, "h": 5, "w": 5}, "no batch normalization operator"),
    "layer_norm": ("NormKernel", {"kind": "layer", "rows": 6, "cols": 64}, "no layer or RMS normalization"),
    "rms_norm": ("NormKernel", {"kind": "rms", "rows": 6, "cols": 64}, "no layer or RMS normalization"),
    "attention": (
        "AttentionKernel",
        {"batch": 1, "heads": 2, "kv_heads": 2, "seq_q": 4, "seq_kv": 4, "head_dim": 8, "causal": True},
        "no attention operator",
    ),
    "silu": ("ActivationKernel", {"function": "silu", "elements": 100}, "LOGISTIC then MUL"),
    "avg-pool-counting-padding": (
        "PoolingKernel",
        {
            "mode": "avg",
            "n": 1,
            "c": 2,
            "h": 9,
            "w": 9,
            "r": 3,
            "s": 3,
            "pad_h": 1,
            "pad_w": 1,
            "stride_h": 1,
            "stride_w": 1,
        },
        "count_include_pad",
    ),
    "resnet-max-pool": (
        "PoolingKernel",
        {
            "mode": "max",
            "n": 1,
            "c": 2,
            "h": 112,
            "w": 112,
            "r": 3,
            "s": 3,
            "pad_h": 1,
            "pad_w": 1,
            "stride_h": 2,
            "stride_w": 2,
        },
        "SAME or VALID",
    ),
}


@pytest.mark.parametrize("case", list(_layer_kernels()))
def test_layer_kernels_pass_their_checks(backend, case: str) -> None:
    """Each layer family TFLite has a builtin operator for matches the float64 reference, and a
    changed output fails the same check."""
    kernel = _layer_kernels()[case]
    part = backend.prepare(kernel, Precision.FP32).parts[0]
    assert part.direction == "fwd" and part.flops == kernel.flops("fwd") and part.min_bytes > 0
    part.run()
    check = part.check()
    assert check.passed and check.error is not None and check.error <= check.tolerance, check
    with pytest.raises(Unsupported, match="float32 only"):
        backend.prepare(kernel, Precision.INT8)


def test_a_changed_layer_output_fails_the_check(backend) -> None:
    model = backend.prepare(_layer_kernels()["softmax"], Precision.FP32)
    part = model.parts[0]
    part.run()
    assert part.check().passed
    assert part.info["operator"] == "SOFTMAX"
    interp = part.run.__self__  # the Interpreter whose invoke is timed: overwrite its output tensor
    out = interp.get_output_details()[0]["index"]
    interp.set_tensor(out, interp.get_tensor(out)[:, ::-1].copy())
    assert not part.check().passed


@pytest.mark.parametrize("case", list(LAYER_UNSUPPORTED))
def test_layers_without_a_builtin_operator_are_unsupported_with_the_reason(backend, case: str) -> None:
    from deepbench.kernels import layers as L

    cls, fields, reason = LAYER_UNSUPPORTED[case]
    kernel = getattr(L, cls)(set="model", index=0, **fields)
    with pytest.raises(Unsupported, match=reason):
        backend.prepare(kernel, Precision.FP32)
