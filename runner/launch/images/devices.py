"""What a platform's containers need from this host, checked before any image is built or pulled.

A vendor image is many GB: finding out after the pull that the host has no GPU wastes the
download and says it late. So before the runner reaches Docker at all it looks for what the
platform's containers will need (as SuperBench does):
  NVIDIA  the driver (/dev/nvidiactl, /proc/driver/nvidia) and the NVIDIA Container Toolkit,
          through which Docker gives containers GPUs (its hook or CLI on PATH, or a CDI spec)
  AMD     /dev/kfd and /dev/dri (the container gets them with the groups that own them and video)
  ARM     an arm64 host, or qemu-user registered with binfmt_misc (with the F flag, so that a
          container finds the emulator); registered here when this process may (root and
          update-binfmts), else the line says what to run
The checks read a few files and PATH: they take milliseconds. They apply when the daemon is on
this host (DOCKER_HOST unset or a unix socket); a remote daemon's devices are not ours to see."""

from __future__ import annotations

import os
import platform as host
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from ...errors import UserError
from ...platforms import Platform
from .docker_client import LOCAL_HINT
from .emulation import is_emulated

NVIDIA_DRIVER = (Path("/dev/nvidiactl"), Path("/proc/driver/nvidia/version"))
NVIDIA_TOOLKIT = ("nvidia-container-runtime-hook", "nvidia-container-cli", "nvidia-container-runtime", "nvidia-ctk")
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
QEMU_ARM64 = "qemu-aarch64"
REGISTER_TIMEOUT_S = 20.0
BINFMT_FIX = (
    "sudo apt-get install qemu-user-static binfmt-support && sudo update-binfmts --enable qemu-aarch64 "
    "(docs/containers.md)"
)

Log = Callable[[str], None]


def daemon_is_local() -> bool:
    docker_host = os.environ.get("DOCKER_HOST", "")
    return not docker_host or docker_host.startswith("unix://")


def check_host(platform: Platform, log: Log = print) -> None:
    """Everything the platform's containers need on this host, or one UserError naming what is missing."""
    if not daemon_is_local():
        return
    if platform.gpus:
        _check_nvidia()
    missing = [d for d in platform.devices if not os.path.exists(d)]
    if missing:
        raise UserError(
            f"this host has no {' or '.join(missing)}, which {platform.name} containers need: install "
            f"the GPU driver (ROCm: amdgpu-dkms) and check the GPU is visible; {LOCAL_HINT}"
        )
    check_can_run(platform, log)


def _check_nvidia() -> None:
    if not any(p.exists() for p in NVIDIA_DRIVER):
        raise UserError(
            f"this host has no NVIDIA driver ({NVIDIA_DRIVER[0]} is absent), which nvidia containers "
            f"need: run on a host with NVIDIA GPUs and their driver; {LOCAL_HINT}"
        )
    cdi = any(d.is_dir() and any(d.glob("nvidia*")) for d in CDI_DIRS)
    if not cdi and not any(shutil.which(tool) for tool in NVIDIA_TOOLKIT):
        raise UserError(
            "the NVIDIA driver is here but not the NVIDIA Container Toolkit (no nvidia-container-cli or "
            "nvidia-container-runtime-hook on PATH, no CDI spec), through which Docker gives containers "
            "GPUs: install it, then sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl "
            f"restart docker; {LOCAL_HINT}"
        )


def check_can_run(platform: Platform, log: Log = print) -> None:
    """The platform's images can run here: the host's own architecture, or arm64 under qemu-user."""
    if not is_emulated(platform):
        return
    if not platform.platform_arch.endswith("arm64"):
        raise UserError(f"{platform.platform_arch} images cannot run on this {host.machine()} host; {LOCAL_HINT}")
    problem = binfmt_problem()
    if problem is None:
        return
    if _register(log):
        return
    raise UserError(
        f"arm64 images cannot run on this {host.machine()} host: {problem}; register qemu-user for "
        f"arm64: {BINFMT_FIX}, or run on an arm64 machine"
    )


def binfmt_problem() -> str | None:
    """Why arm64 binaries cannot run in containers here, or None when they can."""
    if not (BINFMT_DIR / "register").exists():
        return f"binfmt_misc is not mounted at {BINFMT_DIR}"
    try:
        lines = (BINFMT_DIR / QEMU_ARM64).read_text().splitlines()
    except OSError:
        return "qemu-aarch64 is not registered with binfmt_misc"
    if not lines or lines[0].strip() != "enabled":
        return "qemu-aarch64 is registered with binfmt_misc but disabled"
    flags = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("flags:")), "")
    if "F" not in flags:
        return (
            "qemu-aarch64 is registered without the F flag, so a container cannot reach the emulator "
            "(Debian's qemu-user-static registers it with F)"
        )
    return None


def _is_root() -> bool:
    return os.geteuid() == 0


def _register(log: Log) -> bool:
    """Register qemu-aarch64 with binfmt_misc, as root with update-binfmts (binfmt-support)."""
    tool = shutil.which("update-binfmts")
    if not _is_root() or tool is None:
        return False
    try:
        if not (BINFMT_DIR / "register").exists():
            subprocess.run(
                ["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)],
                capture_output=True,
                timeout=REGISTER_TIMEOUT_S,
            )
        subprocess.run([tool, "--enable", QEMU_ARM64], capture_output=True, timeout=REGISTER_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if binfmt_problem() is not None:
        return False
    log(f"registered qemu-aarch64 with binfmt_misc ({tool} --enable {QEMU_ARM64}): arm64 images run here emulated")
    return True
