"""The ARM image, built and run here under emulation (qemu-user through binfmt_misc; CI installs
and enables it): an arm64 Debian base made with debootstrap, aarch64 wheels downloaded on the
host, the image built offline for linux/arm64, and two small device-suite kernels per backend
(fp32 and int8) run inside it with their checks passed, the run marked emulated. Emulation is
slow: a few small kernels only."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deepbench.kernels.results import RunRecord, Status, read_results

from .conftest import REPO, run_cli
from .test_containers import BUILD_TIMEOUT_S, _build, _wheelhouse

# Building the base and the image under emulation can take far longer than pytest.ini's default timeout.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

ARM_BASE = "deepbench-local/debian:bookworm-arm64"
BINFMT = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
RUN_TIMEOUT_S = 1500
# Two small device-suite GEMMs (64x1x1216, 128x1x1024), in fp32 and int8 (the arm platform's defaults).
SELECTION = ("--suite", "inference-device", "--ops", "gemm", "--where", "m<=128,n=1", "--limit", "2")


@pytest.fixture(scope="module")
def arm_image(client):
    if not BINFMT.exists():
        pytest.fail("arm64 binaries cannot run here: enable qemu-user (apt-get install qemu-user-static "
                    "binfmt-support; update-binfmts --enable qemu-aarch64), as .ci/run does")
    proc = subprocess.run(["bash", str(REPO / "images" / "tools" / "local-base.sh"), ARM_BASE, "arm64"],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tag = _build(client, "arm", ARM_BASE, _wheelhouse("arm", []))
    yield tag
    client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def client():
    from .test_containers import _docker

    return _docker()


@pytest.mark.parametrize("backend", ["tflite", "onnxruntime"])
def test_device_kernels_run_in_the_arm_image_marked_emulated(client, arm_image, backend: str, tmp_path: Path) -> None:
    assert client.images.get(arm_image).attrs["Architecture"] == "arm64"
    out = tmp_path / backend
    proc = run_cli("deepbench-run", "--platform", "arm", "--image", arm_image, "--backend", backend, *SELECTION,
                   "--fast", "--time-cap", "0.1", "--out", str(out), timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    results = read_results(out / "results.jsonl")
    assert {r.precision.name.value for r in results} == {"fp32", "int8"}
    assert len({r.kernel.id for r in results}) == 2
    for r in results:
        assert r.status is Status.OK and r.check.passed, (r.id, r.reason)
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.platform == "arm" and record.backend == backend
    assert record.device["machine"] == "aarch64"
    assert record.device["emulated"] is True, record.device.get("emulation")
    assert any("emulated" in w for w in record.device["warnings"])
    assert "emulated" in proc.stdout  # the user is told, not only the files
