"""The ARM image, built and run here under emulation (qemu-user through binfmt_misc, emulating a
Raspberry Pi 4's Cortex-A72; CI installs and enables it): an arm64 Debian base made with
debootstrap, aarch64 wheels downloaded on the host, the image built offline for linux/arm64, and
a small device-suite GEMM and convolution per backend (LiteRT, onnxruntime, PyTorch with oneDNN
and ACL), fp32 and int8, run inside it with their checks passed, the run marked emulated.
Emulation is slow: a few small kernels only."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deepbench.kernels.results import RunRecord, Status
from deepbench.kernels.results_file import read_results

from .conftest import REPO, run_cli
from .test_containers import BUILD_TIMEOUT_S, _build, _wheelhouse

# Building the base and the image under emulation can take far longer than pytest.ini's default timeout.
pytestmark = [pytest.mark.docker, pytest.mark.arm_emulation, pytest.mark.slow, pytest.mark.timeout(3600)]

ARM_BASE = "deepbench-local/debian:bookworm-arm64"
RUN_TIMEOUT_S = 1500
# The first device-suite GEMM and convolution of batch 1 (3072x1x1024; 1x1 64->64 on 112x112), in fp32 and int8
# (the arm platform's defaults).
SELECTION = ("--suite", "inference-device", "--ops", "gemm,conv", "--where", "n=1", "--limit", "1")
# PyTorch has no int8 convolution with an int32 output (kernels/backends/pytorch/conv.py).
TORCH_INT8_CONV = "requantizes to 8 bits"


@pytest.fixture(scope="module")
def arm_image(client):
    proc = subprocess.run(
        ["bash", str(REPO / "images" / "tools" / "local-base.sh"), ARM_BASE, "arm64"],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tag = _build(client, "arm", ARM_BASE, _wheelhouse("arm", []))
    yield tag
    client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def client(docker_client):
    return docker_client


@pytest.mark.parametrize("backend", ["tflite", "onnxruntime", "torch"])
def test_device_kernels_run_in_the_arm_image_marked_emulated(client, arm_image, backend: str, tmp_path: Path) -> None:
    assert client.images.get(arm_image).attrs["Architecture"] == "arm64"
    out = tmp_path / backend
    proc = run_cli(
        "deepbench-run",
        "--platform",
        "arm",
        "--image",
        arm_image,
        "--backend",
        backend,
        *SELECTION,
        # Two threads for PyTorch: with one (the default where other processes keep a core busy, as the host's
        # Docker does here) PyTorch sends a 1x1 convolution of batch 1 to its own loops, not oneDNN (ATen's
        # use_mkldnn: "THNN is faster when single-threaded"), and the Arm Compute Library check below has no call.
        *(("--threads", "2") if backend == "torch" else ()),
        "--fast",
        "--time-cap",
        "0.1",
        "--out",
        str(out),
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    results = {(r.kernel.op, r.precision.name.value): r for r in read_results(out / "results.jsonl")}
    assert set(results) == {(op, p) for op in ("gemm", "conv") for p in ("fp32", "int8")}
    for (op, precision), r in results.items():
        if backend == "torch" and (op, precision) == ("conv", "int8"):
            assert r.status is Status.UNSUPPORTED and TORCH_INT8_CONV in r.reason
            continue
        assert r.status is Status.OK and r.check.passed, (r.id, r.reason)
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.platform == "arm" and record.backend == backend
    assert record.device["machine"] == "aarch64"
    assert record.device["emulated"] is True, record.device.get("emulation")
    assert record.device["emulation"]["emulated_cpu"] == "cortex-a72"
    assert any("emulated" in w for w in record.device["warnings"])
    assert "emulated" in proc.stdout  # the user is told, not only the files
    if backend == "tflite":
        assert record.software["ai_edge_litert"] and record.device["xnnpack_delegate"] is True
        assert results[("gemm", "fp32")].parts[0].info["executed_by"] == "XNNPACK delegate"
    if backend == "torch":  # which oneDNN implementation ran: the Arm Compute Library's for the convolution
        assert record.software["acl"].startswith("v") and record.device["bf16_instructions"] is False
        onednn = {p.direction: p.info["onednn"] for p in results[("conv", "fp32")].parts}
        assert onednn["fwd"]["acl"] is True
        assert any(i.startswith("convolution:") for i in onednn["fwd"]["implementations"])
        gemv = results[("gemm", "fp32")].parts[0].info["onednn"]  # n = 1: PyTorch calls OpenBLAS's GEMV
        assert gemv["implementations"] or "no oneDNN primitive ran" in gemv["note"]
