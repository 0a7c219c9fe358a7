"""The onnxruntime backend on a few small device-suite kernels: every kernel it supports runs and
passes its check, a wrong output fails it, and what it cannot run is `unsupported` with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.backends import load_backend
from deepbench.kernels.backends.contract.base import Unsupported
from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import RunRecord, Settings, Status
from deepbench.kernels.results_file import read_results

from .conftest import run_cli

SMALL = [
    "gemm/inference_device/003",
    "gemm/inference_device/007",
    "conv/inference_device/012",
    "rnn/inference_device/001",
    "rnn/inference_device/002",
]


@pytest.fixture(scope="module")
def backend():
    return load_backend("onnxruntime", Settings(threads=1))


@pytest.mark.parametrize("kid", SMALL)
@pytest.mark.parametrize("precision", [Precision.FP32, Precision.INT8])
def test_small_kernels_pass_their_checks(backend, kid: str, precision: Precision) -> None:
    kernel = by_id()[kid]
    if kernel.op == "rnn" and precision is Precision.INT8:
        with pytest.raises(Unsupported, match="float32 only"):
            backend.prepare(kernel, precision)
        return
    prepared = backend.prepare(kernel, precision)
    assert [p.direction for p in prepared.parts] == ["fwd"]  # an inference runtime: forward only
    part = prepared.parts[0]
    part.run()
    check = part.check()
    assert check.passed, check
    if precision is Precision.INT8:
        assert check.error == 0.0  # integer results are exact
    if kernel.op == "rnn":
        assert prepared.info["input_projection_timed"] is True
        assert part.flops == kernel.flops("fwd", input_projection=True) > kernel.flops("fwd")
    if kernel.op == "conv":
        assert "backward" in prepared.info


@pytest.mark.parametrize("kid", ["gemm/inference_device/003", "conv/inference_device/012"])
def test_a_wrong_output_fails_the_check(backend, kid: str) -> None:
    part = backend.prepare(by_id()[kid], Precision.FP32).parts[0]
    part.run()
    out = part.run.keep[1]["y"]  # the bound output buffer the check reads
    out *= np.float32(1.01)
    assert not part.check().passed


def test_sparse_is_unsupported_with_a_reason(backend) -> None:
    with pytest.raises(Unsupported, match="sparse"):
        backend.prepare(by_id()["sparse_gemm/inference_device/000"], Precision.FP32)


@pytest.mark.slow
def test_device_suite_runs_locally(tmp_path: Path) -> None:
    out = tmp_path / "ort"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "inference-device",
        "--backend",
        "onnxruntime",
        "--precision",
        "fp32,int8",
        "--ops",
        "gemm,rnn,sparse_gemm",
        "--where",
        "n=1",
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
    for r in results:
        if r.op == "sparse_gemm" or (r.op == "rnn" and r.precision.name is Precision.INT8):
            assert r.status is Status.UNSUPPORTED and r.reason, r
        else:
            assert r.status is Status.OK and r.check.passed, (r.id, r.reason)
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.backend == "onnxruntime" and "onnxruntime" in record.software
    assert record.device["threads"] == 1 and record.device["emulated"] is False
    assert "after" in json.loads((out / "facts.json").read_text())["device"]


# Layer benchmarks (kernels/layers.py): one small kernel per family and variant.
def _layer_kernels() -> dict[str, object]:
    from deepbench.kernels import layers as L

    common = {"set": "model", "index": 0}
    return {
        "pooling-max": L.PoolingKernel(
            **common, mode="max", n=2, c=3, h=12, w=12, r=3, s=3, pad_h=1, pad_w=1, stride_h=2, stride_w=2
        ),
        "pooling-avg-padded": L.PoolingKernel(
            **common, mode="avg", n=2, c=3, h=9, w=9, r=3, s=3, pad_h=1, pad_w=1, stride_h=2, stride_w=2
        ),
        "pooling-global": L.PoolingKernel(
            **common, mode="avg", n=2, c=4, h=7, w=7, r=7, s=7, pad_h=0, pad_w=0, stride_h=1, stride_w=1
        ),
        "batch_norm": L.BatchNormKernel(**common, n=2, c=4, h=5, w=5),
        "norm-layer": L.NormKernel(**common, kind="layer", rows=6, cols=64),
        "norm-rms": L.NormKernel(**common, kind="rms", rows=6, cols=64),
        "softmax": L.SoftmaxKernel(**common, rows=6, cols=100),
        **{f"activation-{f}": L.ActivationKernel(**common, function=f, elements=1000) for f in L.ACTIVATIONS},
        "embedding": L.EmbeddingKernel(**common, vocab=1000, dim=32, lookups=50),
        "attention-gqa-causal": L.AttentionKernel(
            **common, batch=2, heads=4, kv_heads=2, seq_q=16, seq_kv=16, head_dim=8, causal=True
        ),
        "attention-cross": L.AttentionKernel(
            **common, batch=2, heads=4, kv_heads=4, seq_q=5, seq_kv=9, head_dim=8, causal=False
        ),
        "elementwise-add": L.ElementwiseKernel(**common, function="add", elements=600, a_elements=600, b_elements=600),
        "elementwise-mul-broadcast": L.ElementwiseKernel(
            **common, function="mul", elements=600, a_elements=600, b_elements=20
        ),
        "batched_gemm": L.BatchedGemmKernel(**common, batch=3, m=16, n=8, k=24, a_t=True, b_t=False),
    }


LAYER_CASES = list(_layer_kernels())
OPERATORS = {
    "pooling-max": "MaxPool",
    "pooling-avg-padded": "AveragePool",
    "pooling-global": "GlobalAveragePool",
    "batch_norm": "BatchNormalization",
    "norm-layer": "LayerNormalization",
    "norm-rms": "RMSNormalization",
    "softmax": "Softmax",
    "activation-gelu": "Gelu",
    "activation-silu": "Mul(x, Sigmoid(x))",
    "embedding": "Gather",
    "attention-cross": "Attention",
    "elementwise-add": "Add",
    "elementwise-mul-broadcast": "Mul",
    "batched_gemm": "MatMul",
}


@pytest.mark.parametrize("case", LAYER_CASES)
def test_layer_kernels_pass_their_checks(backend, case: str) -> None:
    """Every layer family runs as its ONNX operator and matches the float64 reference; a changed
    output fails the same check (so the check reads what the operator wrote)."""
    kernel = _layer_kernels()[case]
    try:
        prepared = backend.prepare(kernel, Precision.FP32)
    except Unsupported as exc:  # only an onnxruntime/onnx too old for opset 23 may refuse, and says so
        assert "opset" in str(exc) and case in ("norm-rms", "attention-gqa-causal", "attention-cross"), exc
        return
    part = prepared.parts[0]
    assert part.direction == "fwd" and part.flops == kernel.flops("fwd") and part.min_bytes > 0
    if case in OPERATORS:
        assert part.info["operator"] == OPERATORS[case]
    part.run()
    check = part.check()
    assert check.passed and check.error is not None and check.error <= check.tolerance, check
    out = part.run.keep[1]["y"]
    out += np.float32(0.05) * np.abs(out).max()
    assert not part.check().passed


def test_layer_precisions_other_than_fp32_are_unsupported_with_a_reason(backend) -> None:
    kernels = _layer_kernels()
    for case in ("softmax", "attention-cross"):
        for precision in (Precision.FP16, Precision.INT8):
            with pytest.raises(Unsupported, match="float32 only"):
                backend.prepare(kernels[case], precision)
    uneven = kernels["attention-cross"].model_copy(update={"heads": 6})  # 6 query heads, 4 key/value heads
    with pytest.raises(Unsupported, match="evenly"):
        backend.prepare(uneven, Precision.FP32)


@pytest.mark.slow
def test_model_suite_layers_run_locally(tmp_path: Path) -> None:
    """`deepbench-run --backend onnxruntime --suite model:resnet50` runs the layer kernels there."""
    out = tmp_path / "ort-model"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "model:resnet50",
        "--batch",
        "1",
        "--backend",
        "onnxruntime",
        "--ops",
        "pooling,batch_norm,activation,elementwise",
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
    assert {r.op for r in results} == {"pooling", "batch_norm", "activation", "elementwise"}
    assert all(r.status is Status.OK and r.check.passed for r in results), [(r.id, r.reason) for r in results]
