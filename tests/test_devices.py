"""The device check that comes before any build or pull (runner/launch/images/devices.py): on this host (no
NVIDIA or AMD GPU) `deepbench-run --platform nvidia|amd` must exit 2 with one line within 2 s,
without a byte to the Docker daemon (a listening socket stands in for it and must see no
connection) and without writing a results folder. The NVIDIA toolkit and binfmt branches are
driven through fake files and a fake update-binfmts."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from deepbench.runner.errors import UserError
from deepbench.runner.launch.images import devices
from deepbench.runner.platforms import get_platform

from .conftest import run_cli

LIMIT_S = 2.0
EXIT_USAGE = 2


@pytest.mark.parametrize("platform, words", [("nvidia", "no NVIDIA driver"), ("amd", "/dev/kfd")])
def test_gpu_platform_without_its_devices_exits_2_at_once(tmp_path: Path, platform: str, words: str) -> None:
    if platform == "nvidia" and any(p.exists() for p in devices.NVIDIA_DRIVER):
        pytest.skip("this host has the NVIDIA driver")
    if platform == "amd" and os.path.exists("/dev/kfd"):
        pytest.skip("this host has /dev/kfd")
    daemon = socket.socket(socket.AF_UNIX)
    daemon.bind(str(tmp_path / "docker.sock"))
    daemon.listen(1)
    daemon.setblocking(False)
    env = {"DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"}
    run_cli("deepbench-run", "--version", env=env)  # bytecode compiled, as for any later run
    out = tmp_path / "out"
    started = time.monotonic()
    proc = run_cli("deepbench-run", "--platform", platform, "--suite", "smoke", "--out", str(out), env=env)
    elapsed = time.monotonic() - started
    try:
        with pytest.raises(BlockingIOError):
            daemon.accept()  # nobody asked the daemon anything: no build, no pull, no cache
    finally:
        daemon.close()
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and "--local" in lines[0], proc.stderr
    assert elapsed < LIMIT_S, f"{elapsed:.2f} s"
    assert not out.exists()


def test_nvidia_driver_without_the_container_toolkit(tmp_path: Path, monkeypatch) -> None:
    driver = tmp_path / "nvidiactl"
    driver.write_text("")
    monkeypatch.setattr(devices, "NVIDIA_DRIVER", (driver,))
    monkeypatch.setattr(devices, "CDI_DIRS", (tmp_path / "cdi",))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    with pytest.raises(UserError, match="not the NVIDIA Container Toolkit"):
        devices.check_host(get_platform("nvidia"))
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_text("cdiVersion: 0.5.0\n")  # the toolkit's CDI spec
    devices.check_host(get_platform("nvidia"))


def test_remote_daemon_is_not_checked_here(monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://gpu-server:2376")
    devices.check_host(get_platform("amd"))  # that host's devices are not ours to see


def _binfmt(tmp_path: Path, monkeypatch, entry: str | None) -> Path:
    folder = tmp_path / "binfmt_misc"
    folder.mkdir()
    (folder / "register").write_text("")
    if entry is not None:
        (folder / devices.QEMU_ARM64).write_text(entry)
    monkeypatch.setattr(devices, "BINFMT_DIR", folder)
    monkeypatch.setattr(devices, "is_emulated", lambda platform: True)  # as on any x86 host
    return folder


ENABLED = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PF\noffset 0\n"


def test_arm_on_x86_needs_binfmt_with_the_f_flag(tmp_path: Path, monkeypatch) -> None:
    folder = _binfmt(tmp_path, monkeypatch, ENABLED)
    devices.check_can_run(get_platform("arm"))
    (folder / devices.QEMU_ARM64).write_text(ENABLED.replace("flags: PF", "flags: P"))
    monkeypatch.setattr(devices, "_is_root", lambda: False)
    with pytest.raises(UserError, match="without the F flag"):
        devices.check_can_run(get_platform("arm"))


def test_arm_binfmt_missing_says_what_to_run(tmp_path: Path, monkeypatch) -> None:
    _binfmt(tmp_path, monkeypatch, None)
    monkeypatch.setattr(devices, "_is_root", lambda: False)
    with pytest.raises(UserError) as err:
        devices.check_can_run(get_platform("arm"))
    assert "not registered" in str(err.value) and "update-binfmts --enable qemu-aarch64" in str(err.value)


def test_arm_binfmt_registered_by_the_runner_as_root(tmp_path: Path, monkeypatch) -> None:
    """As root with update-binfmts on PATH, the runner registers qemu-aarch64 itself."""
    folder = _binfmt(tmp_path, monkeypatch, None)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "update-binfmts"
    fake.write_text(
        f"#!/bin/sh\n[ \"$1 $2\" = '--enable qemu-aarch64' ] && printf '{ENABLED}' > {folder}/qemu-aarch64\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setattr(devices, "_is_root", lambda: True)
    said = []
    devices.check_can_run(get_platform("arm"), log=said.append)
    assert devices.binfmt_problem() is None
    assert said and "registered qemu-aarch64" in said[0]


def test_compare_says_which_side_ran_emulated() -> None:
    """An arm64 run under qemu-user against DeepBench's Raspberry Pi 3 figures: the heading says so."""
    from deepbench.runner.analysis.compare import Comparison
    from deepbench.runner.analysis.sources import Source
    from deepbench.runner.render.compare_render import heading

    run = Source(label="pi-on-x86", kind="run", entries=(), specs={"device.emulated": "True"}, ceilings={})
    ref = Source(label="DeepBench Raspberry Pi 3", kind="reference", entries=(), specs={}, ceilings={})
    text = heading(Comparison(sources=[ref, run], by="params", threshold=0.05))
    assert "pi-on-x86 (run, emulated)" in text and "pi-on-x86 ran emulated" in text
    plain = heading(Comparison(sources=[ref, Source("native", "run", (), {}, {})], by="params", threshold=0.05))
    assert "emulated" not in plain
