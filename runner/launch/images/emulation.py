"""Running an arm64 image on an x86 host (qemu-user through binfmt_misc): what the container
needs so that the ARM runtimes can start there.

Under qemu-user the container still reads the host kernel's /proc/cpuinfo, which describes x86
processors. The ARM builds of onnxruntime (and XNNPACK) detect the CPU with the cpuinfo library,
which cannot parse that: onnxruntime 1.31 crashes at import (a segmentation fault in the harness,
a hang in a plain `import onnxruntime`). For emulated runs only, the runner mounts a /proc/cpuinfo
describing generic ARMv8 (Cortex-A72, as on a Raspberry Pi 4) cores, one per host CPU. The run is
still detected as emulated from /proc/sys/kernel/arch (the host kernel's own machine), and the
substitution is recorded through DEEPBENCH_EMULATED_CPUINFO; on real ARM hardware nothing is mounted.

The emulated processor is a Cortex-A72 too (QEMU_CPU, read by qemu-user for every process it
starts): qemu's default `max` CPU has SVE, BF16 and I8MM, which no Raspberry Pi has, so the
libraries would take code paths a Pi never runs (oneDNN reports SVE-512 under `max`), and an
instruction a Pi 4 lacks would go unnoticed (PyTorch 2.10.0's aarch64 wheel stops with SIGILL on
cortex-a72, as on a Pi 4; 2.9.1 runs)."""

from __future__ import annotations

import os
import platform as host
import tempfile
from pathlib import Path
from typing import Any

from ...platforms import Platform

CPUINFO_ENV = "DEEPBENCH_EMULATED_CPUINFO"
QEMU_CPU_ENV = "QEMU_CPU"
EMULATED_CPU = "cortex-a72"  # a Raspberry Pi 4's cores, as the cpuinfo below
ARCH_FAMILY = {"linux/arm64": ("aarch64", "arm64"), "linux/amd64": ("x86_64", "amd64")}
# One core's block, as a Raspberry Pi 4 (Cortex-A72, part 0xd08) kernel writes it.
ARMV8_CORE = (
    "processor\t: {i}\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n"
    "CPU revision\t: 3\n\n"
)


def is_emulated(platform: Platform) -> bool:
    """True when the platform's images cannot run natively on this host."""
    native = ARCH_FAMILY.get(platform.platform_arch)
    return native is not None and host.machine().lower() not in native


def _cpuinfo_file() -> Path:
    count = os.cpu_count() or 1
    path = Path(tempfile.gettempdir()) / f"deepbench-armv8-cpuinfo-{count}"
    text = "".join(ARMV8_CORE.format(i=i) for i in range(count))
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def container_additions(platform: Platform) -> tuple[dict[str, Any], dict[str, str]]:
    """(volumes, environment) to add to an emulated arm64 container; empty when native."""
    if not is_emulated(platform) or not platform.platform_arch.endswith("arm64"):
        return {}, {}
    return (
        {str(_cpuinfo_file()): {"bind": "/proc/cpuinfo", "mode": "ro"}},
        {
            CPUINFO_ENV: f"armv8 cpuinfo mounted by the runner: the host's describes x86 processors; qemu emulates a "
            f"{EMULATED_CPU}",
            QEMU_CPU_ENV: EMULATED_CPU,
        },
    )
