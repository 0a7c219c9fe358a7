"""The onnxruntime backend on a few small device-suite kernels: every kernel it supports runs and
passes its check, a wrong output fails it, and what it cannot run is `unsupported` with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.backends import load_backend
from deepbench.kernels.backends.base import Unsupported
from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import RunRecord, Settings, Status, read_results

from .conftest import run_cli

SMALL = ["gemm/inference_device/003", "gemm/inference_device/007", "conv/inference_device/012",
         "rnn/inference_device/001", "rnn/inference_device/002"]


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
    proc = run_cli("deepbench-run", "--local", "--suite", "inference-device", "--backend", "onnxruntime",
                   "--precision", "fp32,int8", "--ops", "gemm,rnn,sparse_gemm", "--where", "n=1", "--fast",
                   "--time-cap", "0.05", "--threads", "1", "--out", str(out))
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
