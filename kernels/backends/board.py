"""Facts about the CPU board the harness runs on, read from /proc and /sys without any library:
the model (the device tree's on a Raspberry Pi), cores, clocks, temperature, throttling
(`vcgencmd get_throttled` where the firmware tool exists), memory, and whether this process is
emulated (an arm64 image on an x86 host under qemu-user), so that emulation is never passed
off as hardware.

Emulation signal: qemu-user fakes uname (platform.machine() says aarch64) but not the kernel's
own view of the machine. /proc/sys/kernel/arch (Linux >= 5.x... reads the kernel's utsname
machine without going through the emulated uname syscall) and /proc/cpuinfo (the host's
processors: x86 fields such as `vendor_id` and `flags`, no ARM `CPU implementer`) both come
from the real kernel. Either disagreeing with the process's architecture marks the run
emulated; both are recorded as the evidence."""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..system import cpu_model

DEVICE_TREE_MODEL = Path("/proc/device-tree/model")
CPUINFO = Path("/proc/cpuinfo")
KERNEL_ARCH = Path("/proc/sys/kernel/arch")
THERMAL_GLOB = "/sys/class/thermal/thermal_zone*"
CPUFREQ_GLOB = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq"
VCGENCMD_TIMEOUT_S = 5
EMULATED_CPUINFO_ENV = "DEEPBENCH_EMULATED_CPUINFO"  # set by runner/emulation.py
ARM_MACHINES = ("aarch64", "arm64", "armv7l", "armv8l", "armv6l")
X86_MACHINES = ("x86_64", "amd64", "i386", "i686")
# vcgencmd get_throttled bits (Raspberry Pi firmware): now (0-3) and since boot (16-19).
THROTTLE_BITS = {0: "under-voltage", 1: "arm frequency capped", 2: "throttled", 3: "soft temperature limit",
                 16: "under-voltage occurred", 17: "arm frequency capping occurred", 18: "throttling occurred",
                 19: "soft temperature limit occurred"}


def _read(path: Path | str) -> str | None:
    try:
        return Path(path).read_text(errors="replace").strip("\x00\n ")
    except OSError:
        return None


def _family(machine: str) -> str:
    m = machine.lower()
    if m in ARM_MACHINES or m.startswith("arm"):
        return "arm"
    if m in X86_MACHINES:
        return "x86"
    return m


def cpuinfo_family(text: str) -> str | None:
    """Which processor family /proc/cpuinfo describes (the real kernel's), or None."""
    if re.search(r"^(CPU implementer|CPU architecture)\s*:", text, re.M):
        return "arm"
    if re.search(r"^vendor_id\s*:\s*(GenuineIntel|AuthenticAMD|HygonGenuine)", text, re.M) or \
            re.search(r"^flags\s*:.*\b(sse2|avx)\b", text, re.M):
        return "x86"
    return None


def emulation(machine: str | None = None, cpuinfo: str | None = None, kernel_arch: str | None = None
              ) -> dict[str, Any]:
    """{'emulated': bool, 'evidence': [...]} for this process (arguments for tests)."""
    machine = machine if machine is not None else platform.machine()
    cpuinfo = cpuinfo if cpuinfo is not None else (_read(CPUINFO) or "")
    kernel_arch = kernel_arch if kernel_arch is not None else _read(KERNEL_ARCH)
    mine = _family(machine)
    evidence = []
    if kernel_arch and _family(kernel_arch) != mine:
        evidence.append(f"process machine {machine} but kernel arch {kernel_arch} (/proc/sys/kernel/arch)")
    seen = cpuinfo_family(cpuinfo)
    if seen and seen != mine:
        evidence.append(f"process machine {machine} but /proc/cpuinfo describes {seen} processors")
    substituted = os.environ.get(EMULATED_CPUINFO_ENV)
    if substituted:  # the runner's emulated-arm64 mount (runner/emulation.py): cpuinfo is not the host's
        evidence.append(f"{EMULATED_CPUINFO_ENV}: {substituted}")
    return {"emulated": bool(evidence), "evidence": evidence, "process_machine": machine,
            "kernel_arch": kernel_arch}


def clocks_mhz() -> dict[str, dict[str, float]]:
    """Per CPU: current, min and max frequency from cpufreq (kHz in sysfs)."""
    out: dict[str, dict[str, float]] = {}
    for d in sorted(glob.glob(CPUFREQ_GLOB)):
        cpu = Path(d).parent.name
        vals = {}
        for key, name in (("scaling_cur_freq", "cur"), ("cpuinfo_min_freq", "min"), ("cpuinfo_max_freq", "max")):
            text = _read(Path(d) / key)
            if text and text.isdigit():
                vals[name] = int(text) / 1000.0
        if vals:
            out[cpu] = vals
    return out


def temperatures_c() -> dict[str, float]:
    out = {}
    for zone in sorted(glob.glob(THERMAL_GLOB)):
        kind, temp = _read(Path(zone) / "type"), _read(Path(zone) / "temp")
        if temp and temp.lstrip("-").isdigit():
            out[f"{Path(zone).name}:{kind or '?'}"] = int(temp) / 1000.0
    return out


def throttled() -> dict[str, Any] | None:
    """`vcgencmd get_throttled` decoded, or None where the tool is absent (not a Pi)."""
    tool = shutil.which("vcgencmd")
    if not tool:
        return None
    try:
        text = subprocess.run([tool, "get_throttled"], capture_output=True, text=True,
                              timeout=VCGENCMD_TIMEOUT_S).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": str(exc)}
    match = re.search(r"0x([0-9a-fA-F]+)", text)
    if not match:
        return {"raw": text}
    value = int(match.group(1), 16)
    return {"raw": text, "value": value, "flags": [name for bit, name in THROTTLE_BITS.items() if value >> bit & 1]}


def snapshot() -> dict[str, Any]:
    """What changes during a run: clocks, temperatures, throttling."""
    snap: dict[str, Any] = {"clocks_mhz": clocks_mhz(), "temperature_c": temperatures_c()}
    thr = throttled()
    if thr is not None:
        snap["throttled"] = thr
    return snap


def throttle_warning(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """A warning when the board throttled during the run (firmware flags now set that were not)."""
    b = set((before.get("throttled") or {}).get("flags", []))
    a = set((after.get("throttled") or {}).get("flags", []))
    new = sorted(a - b)
    if new:
        return f"the board throttled during the run: {', '.join(new)} (vcgencmd get_throttled)"
    return None


def board_model(cpuinfo: str) -> str | None:
    """The device tree's model; in a container, where Docker masks /sys/firmware (and with it
    /proc/device-tree), the `Model` line a Raspberry Pi kernel puts in /proc/cpuinfo."""
    model = _read(DEVICE_TREE_MODEL)
    if model:
        return model
    match = re.search(r"^Model\s*:\s*(.+)$", cpuinfo, re.M)
    return match.group(1).strip() if match else None


def memory_gib() -> float | None:
    text = _read("/proc/meminfo") or ""
    match = re.search(r"^MemTotal:\s*(\d+)", text, re.M)
    return round(int(match.group(1)) / 2**20, 2) if match else None


def cpu_facts() -> dict[str, Any]:
    """The device facts of a CPU backend: model, board, cores, memory, emulation, and a snapshot."""
    cpuinfo = _read(CPUINFO) or ""
    emu = emulation(cpuinfo=cpuinfo)
    facts: dict[str, Any] = {
        # The name follows the system description's rule (the submission checker compares them).
        "kind": "cpu", "name": cpu_model(), "machine": platform.machine(), "logical_cpus": os.cpu_count(),
        "memory_gib": memory_gib(), "emulated": emu["emulated"], "emulation": emu,
    }
    board = board_model(cpuinfo)
    if board:
        facts["board"] = board
    facts["before"] = snapshot()
    return facts


def emulation_warning(emu: dict[str, Any]) -> str | None:
    if not emu.get("emulated"):
        return None
    return (f"this run was emulated ({emu.get('process_machine')} code on a host whose kernel is "
            f"{emu.get('kernel_arch') or 'another architecture'}): its times are the emulator's, not the hardware's")


def facts_after(before: dict[str, Any]) -> dict[str, Any]:
    """The end-of-run snapshot and the warnings a reader must see (throttling, emulation)."""
    after = snapshot()
    throttling = throttle_warning(before.get("before", {}), after)
    warnings = [w for w in (throttling, emulation_warning(before.get("emulation", {}))) if w]
    return {"after": after, "throttled_during_run": throttling is not None, "warnings": warnings}
