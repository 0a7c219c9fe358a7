"""Facts about the CPU board the harness runs on, read from /proc and /sys without any library:
the model and SoC (the device tree's, or a Raspberry Pi's revision code), cores and clusters
(big.LITTLE: one cpufreq policy per cluster, each core's Arm part), each cluster's governor and
clocks, temperatures, throttling (throttling.py), memory, and whether this process is emulated
(an arm64 image on an x86 host under qemu-user), so that emulation is never passed off as
hardware. Everything is read under `root` ("/" on a board; a recorded tree in the tests).

Emulation signal: qemu-user fakes uname (platform.machine() says aarch64) but not the kernel's
own view of the machine. /proc/sys/kernel/arch (the kernel's utsname machine, not through the
emulated uname syscall) and /proc/cpuinfo (the host's processors: x86 fields such as `vendor_id`
and `flags`, no ARM `CPU implementer`) both come from the real kernel. Either disagreeing with
the process's architecture marks the run emulated; both are recorded as the evidence. An
emulated run's /sys describes the host, so its throttling is not watched."""

from __future__ import annotations

import glob
import os
import platform
import re
from pathlib import Path
from typing import Any

from ...system import cpu_model
from . import throttling

ROOT = Path("/")
DEVICE_TREE = ("proc/device-tree", "sys/firmware/devicetree/base")
CPUINFO = "proc/cpuinfo"
KERNEL_ARCH = "proc/sys/kernel/arch"
MEMINFO = "proc/meminfo"
THERMAL_GLOB = "sys/class/thermal/thermal_zone*"
POLICY_GLOB = "sys/devices/system/cpu/cpufreq/policy*"
EMULATED_CPUINFO_ENV = "DEEPBENCH_EMULATED_CPUINFO"  # set by runner/launch/images/emulation.py
QEMU_CPU_ENV = "QEMU_CPU"
ARM_MACHINES = ("aarch64", "arm64", "armv7l", "armv8l", "armv6l")
X86_MACHINES = ("x86_64", "amd64", "i386", "i686")
RASPBERRY_PI = "Raspberry Pi"
ARM_IMPLEMENTER = "0x41"
# Arm's part numbers (/proc/cpuinfo "CPU part", implementer 0x41), from Arm's technical reference manuals.
ARM_PARTS = {
    "0xd03": "Cortex-A53",
    "0xd04": "Cortex-A35",
    "0xd05": "Cortex-A55",
    "0xd07": "Cortex-A57",
    "0xd08": "Cortex-A72",
    "0xd09": "Cortex-A73",
    "0xd0a": "Cortex-A75",
    "0xd0b": "Cortex-A76",
    "0xd0c": "Neoverse-N1",
    "0xd0d": "Cortex-A77",
    "0xd40": "Neoverse-V1",
    "0xd41": "Cortex-A78",
    "0xd44": "Cortex-X1",
    "0xd46": "Cortex-A510",
    "0xd47": "Cortex-A710",
    "0xd48": "Cortex-X2",
    "0xd49": "Neoverse-N2",
    "0xd4d": "Cortex-A715",
    "0xd4e": "Cortex-X3",
    "0xd4f": "Neoverse-V2",
    "0xd80": "Cortex-A520",
    "0xd81": "Cortex-A720",
    "0xd82": "Cortex-X4",
}
# Raspberry Pi's new-style revision codes (its documentation, "Raspberry Pi revision codes"):
# bit 23 new style, 22-20 memory, 19-16 maker, 15-12 processor, 11-4 type, 3-0 revision.
REVISION_NEW_STYLE_BIT = 23
PI_PROCESSORS = {0: "BCM2835", 1: "BCM2836", 2: "BCM2837", 3: "BCM2711", 4: "BCM2712"}
PI_MEMORY_MB = {0: 256, 1: 512, 2: 1024, 3: 2048, 4: 4096, 5: 8192, 6: 16384}


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
    if re.search(r"^vendor_id\s*:\s*(GenuineIntel|AuthenticAMD|HygonGenuine)", text, re.M) or re.search(
        r"^flags\s*:.*\b(sse2|avx)\b", text, re.M
    ):
        return "x86"
    return None


def emulation(machine: str | None = None, cpuinfo: str | None = None, kernel_arch: str | None = None) -> dict[str, Any]:
    """{'emulated': bool, 'evidence': [...]} for this process (arguments for tests)."""
    machine = machine if machine is not None else platform.machine()
    cpuinfo = cpuinfo if cpuinfo is not None else (_read(ROOT / CPUINFO) or "")
    kernel_arch = kernel_arch if kernel_arch is not None else _read(ROOT / KERNEL_ARCH)
    mine = _family(machine)
    evidence = []
    if kernel_arch and _family(kernel_arch) != mine:
        evidence.append(f"process machine {machine} but kernel arch {kernel_arch} (/proc/sys/kernel/arch)")
    seen = cpuinfo_family(cpuinfo)
    if seen and seen != mine:
        evidence.append(f"process machine {machine} but /proc/cpuinfo describes {seen} processors")
    substituted = os.environ.get(EMULATED_CPUINFO_ENV)
    if substituted:  # the runner's emulated-arm64 mount (runner/launch/images/emulation.py): cpuinfo is not the host's
        evidence.append(f"{EMULATED_CPUINFO_ENV}: {substituted}")
    emu = {"emulated": bool(evidence), "evidence": evidence, "process_machine": machine, "kernel_arch": kernel_arch}
    if evidence and os.environ.get(QEMU_CPU_ENV):
        # the processor qemu-user emulates (runner/launch/images/emulation.py)
        emu["emulated_cpu"] = os.environ[QEMU_CPU_ENV]
    return emu


# ----- what the board is ----------------------------------------------------------------------
def _device_tree(root: Path, name: str) -> str | None:
    for base in DEVICE_TREE:
        text = _read(root / base / name)
        if text:
            return text
    return None


def _cpuinfo_field(cpuinfo: str, key: str) -> str | None:
    match = re.search(rf"^{key}\s*:\s*(.+)$", cpuinfo, re.M)
    return match.group(1).strip() if match else None


def board_model(cpuinfo: str, root: Path = ROOT) -> str | None:
    """The device tree's model; in a container, where Docker masks /sys/firmware (and with it
    /proc/device-tree), the `Model` line a Raspberry Pi kernel puts in /proc/cpuinfo."""
    return _device_tree(root, "model") or _cpuinfo_field(cpuinfo, "Model")


def pi_revision(code: str) -> dict[str, Any] | None:
    """A Raspberry Pi's new-style revision code decoded: processor (SoC), memory, board revision."""
    try:
        value = int(code, 16)
    except ValueError:
        return None
    if not value >> REVISION_NEW_STYLE_BIT & 1:
        return None
    return {
        "code": code,
        "soc": PI_PROCESSORS.get(value >> 12 & 0xF),
        "memory_mb": PI_MEMORY_MB.get(value >> 20 & 0x7),
        "board_revision": f"1.{value & 0xF}",
    }


def soc(cpuinfo: str, root: Path = ROOT) -> str | None:
    """The SoC: the device tree's last `compatible` entry (e.g. brcm,bcm2712), else the processor
    of a Raspberry Pi's revision code (the `Hardware` line says BCM2835 on every Pi: not used)."""
    compatible = _device_tree(root, "compatible")
    if compatible:
        return compatible.split("\x00")[-1].split(",")[-1].upper()
    revision = pi_revision(_cpuinfo_field(cpuinfo, "Revision") or "")
    return revision["soc"] if revision else None


def core_types(cpuinfo: str) -> dict[int, str]:
    """Each processor's core from its `CPU part` (Arm's own cores by name, others by number)."""
    types = {}
    for block in cpuinfo.split("\n\n"):
        index = _cpuinfo_field(block, "processor")
        part = _cpuinfo_field(block, "CPU part")
        if index is None or not index.isdigit() or part is None:
            continue
        implementer = _cpuinfo_field(block, "CPU implementer")
        types[int(index)] = ARM_PARTS.get(part, part) if implementer == ARM_IMPLEMENTER else f"{implementer}:{part}"
    return types


def _cpu_list(text: str) -> list[int]:
    """'0-3 6' or '0 1 2 3' -> [0, 1, 2, 3, 6]."""
    cpus: list[int] = []
    for item in text.replace(",", " ").split():
        low, _, high = item.partition("-")
        cpus += list(range(int(low), int(high or low) + 1))
    return cpus


def _khz_to_mhz(text: str | None) -> float | None:
    return int(text) / 1000.0 if text and text.isdigit() else None


def clusters(root: Path = ROOT, cpuinfo: str = "") -> list[dict[str, Any]]:
    """One entry per cpufreq policy (the CPUs that share a clock: a cluster): its CPUs, their
    core, the governor, and minimum, maximum (hardware and allowed) and current clocks in MHz."""
    types = core_types(cpuinfo)
    out = []
    for policy in sorted(glob.glob(str(root / POLICY_GLOB)), key=lambda p: int(re.sub(r"\D", "", Path(p).name) or 0)):
        p = Path(policy)
        cpus = _cpu_list(_read(p / "related_cpus") or _read(p / "affected_cpus") or "")
        entry: dict[str, Any] = {
            "policy": p.name,
            "cpus": cpus,
            "core": sorted({types[c] for c in cpus if c in types}) or None,
            "governor": _read(p / "scaling_governor"),
        }
        for key, name in (
            ("cpuinfo_min_freq", "min_mhz"),
            ("cpuinfo_max_freq", "max_mhz"),
            ("scaling_max_freq", "allowed_max_mhz"),
            ("scaling_cur_freq", "cur_mhz"),
        ):
            entry[name] = _khz_to_mhz(_read(p / key))
        out.append(entry)
    return out


def temperatures_c(root: Path = ROOT) -> dict[str, float]:
    out = {}
    for zone in sorted(glob.glob(str(root / THERMAL_GLOB))):
        kind, temp = _read(Path(zone) / "type"), _read(Path(zone) / "temp")
        if temp and temp.lstrip("-").isdigit():
            out[f"{Path(zone).name}:{kind or '?'}"] = int(temp) / 1000.0
    return out


def memory_gib(root: Path = ROOT) -> float | None:
    match = re.search(r"^MemTotal:\s*(\d+)", _read(root / MEMINFO) or "", re.M)
    return round(int(match.group(1)) / 2**20, 2) if match else None


def is_raspberry_pi(board: str | None) -> bool:
    return board is not None and board.startswith(RASPBERRY_PI)


# ----- a run's facts --------------------------------------------------------------------------
def snapshot(root: Path = ROOT, cpuinfo: str = "", raspberry_pi: bool = False, throttle: bool = True) -> dict[str, Any]:
    """What changes during a run: each cluster's governor and clocks, temperatures, throttling."""
    snap: dict[str, Any] = {
        "clocks_mhz": {
            c["policy"]: {k: c[k] for k in ("governor", "cur_mhz", "allowed_max_mhz", "max_mhz")}
            for c in clusters(root, cpuinfo)
        },
        "temperature_c": temperatures_c(root),
    }
    if throttle:
        snap["throttled"] = throttling.state(root, raspberry_pi)
    return snap


def cpu_facts(root: Path = ROOT, machine: str | None = None) -> dict[str, Any]:
    """The device facts of a CPU backend: model, board, SoC, cores and clusters, memory, emulation,
    and a first snapshot (`before`)."""
    cpuinfo = _read(root / CPUINFO) or ""
    emu = emulation(machine=machine, cpuinfo=cpuinfo, kernel_arch=_read(root / KERNEL_ARCH))
    board = board_model(cpuinfo, root)
    facts: dict[str, Any] = {
        # The name follows the system description's rule (the submission checker compares them).
        "kind": "cpu",
        "name": cpu_model(),
        "machine": machine or platform.machine(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": memory_gib(root),
        "emulated": emu["emulated"],
        "emulation": emu,
    }
    if board:
        facts["board"] = board
    chip = soc(cpuinfo, root)
    if chip:
        facts["soc"] = chip
    revision = pi_revision(_cpuinfo_field(cpuinfo, "Revision") or "")
    if revision:
        facts["revision"] = revision
    facts["clusters"] = [
        {k: c[k] for k in ("policy", "cpus", "core", "min_mhz", "max_mhz")} for c in clusters(root, cpuinfo)
    ]
    facts["cores"] = {
        "count": len(core_types(cpuinfo)) or os.cpu_count(),
        "types": sorted(set(core_types(cpuinfo).values())),
    }
    # An emulated run's /sys is the host's: its throttling says nothing about the board emulated.
    facts["before"] = snapshot(root, cpuinfo, is_raspberry_pi(board), throttle=not emu["emulated"])
    return facts


def emulation_warning(emu: dict[str, Any]) -> str | None:
    if not emu.get("emulated"):
        return None
    return (
        f"this run was emulated ({emu.get('process_machine')} code on a host whose kernel is "
        f"{emu.get('kernel_arch') or 'another architecture'}): its times are the emulator's, not the hardware's"
    )


def facts_after(before: dict[str, Any], root: Path = ROOT) -> dict[str, Any]:
    """The end-of-run snapshot and the warnings a reader must see (throttling, emulation)."""
    start = before.get("before", {})
    after = snapshot(
        root, _read(root / CPUINFO) or "", is_raspberry_pi(before.get("board")), throttle="throttled" in start
    )
    first, last = start.get("throttled", {}), after.get("throttled", {})
    warnings = [w for w in (throttling.warning(first, last), emulation_warning(before.get("emulation", {}))) if w]
    return {
        "after": after,
        "throttled_during_run": bool(throttling.new_flags(first, last)),
        "throttled_at_start": bool(first.get("now")),
        "warnings": warnings,
    }


class BoardMonitor:
    """A CPU backend's board: its facts read when the backend starts (`facts`), its throttling
    looked at again after each measurement (`mark`: a kernel measured while the board throttled is
    flagged), and the end-of-run snapshot with the warnings (`after`)."""

    def __init__(self, root: Path = ROOT, machine: str | None = None) -> None:
        self.root = root
        self.facts = cpu_facts(root, machine)
        self.watch = throttling.ThrottleWatch(
            root, is_raspberry_pi(self.facts.get("board")), active=not self.facts["emulated"]
        )

    def mark(self, info: dict[str, Any]) -> None:
        self.watch.mark(info)

    def after(self) -> dict[str, Any]:
        return facts_after(self.facts, self.root)
