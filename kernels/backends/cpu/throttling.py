"""Whether a board's CPU is throttled now, or was since the last look: read from the Raspberry Pi
firmware where it says so, else from what the kernel shows in sysfs, never guessed.

Sources, in order:
1. `vcgencmd get_throttled` (Raspberry Pi OS ships the firmware tool; mounted into a container
   by the runner when present): the firmware's own bits, now (0-3) and since boot (16-19).
2. The same value from sysfs, `get_throttled` of the firmware device (Raspberry Pi kernels since
   4.19 write it in hexadecimal, without 0x), where vcgencmd is absent.
3. Without the firmware's value: under-voltage from the `rpi_volt` hwmon sensor's
   `in0_lcrit_alarm`; a clock cap from cpufreq (a policy's scaling_max_freq below its
   cpuinfo_max_freq); heat from the thermal zones (at or above a `passive` trip point, where the
   kernel's thermal governor cuts the clock; on a Raspberry Pi at or above 80 C, where the Pi 4's
   and Pi 5's firmware starts to throttle the ARM cores). These have no since-boot bits: a
   throttle that came and went between two looks is missed.
"""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

VCGENCMD_TIMEOUT_S = 5
# The firmware device: soc/soc:firmware on a Pi 1-4, under a soc@<address> bus on a Pi 5 (no deeper search:
# /sys/devices/platform is large).
FIRMWARE_GLOBS = ("sys/devices/platform/*/*:firmware/get_throttled", "sys/devices/platform/*:firmware/get_throttled")
HWMON_GLOB = "sys/class/hwmon/hwmon*"
POLICY_GLOB = "sys/devices/system/cpu/cpufreq/policy*"
THERMAL_GLOB = "sys/class/thermal/thermal_zone*"
PI_UNDERVOLT_SENSOR = "rpi_volt"
# The Raspberry Pi documentation ("Frequency management and thermal control"): from 80 C the Pi 4's
# and Pi 5's firmware throttles the ARM cores, more at 85 C.
PI_FIRMWARE_THROTTLE_C = 80.0
NOW_BITS = {0: "under-voltage", 1: "arm frequency capped", 2: "throttled", 3: "soft temperature limit"}
SINCE_BOOT_SHIFT = 16
THROTTLE_BITS = {**NOW_BITS, **{bit + SINCE_BOOT_SHIFT: f"{name} occurred" for bit, name in NOW_BITS.items()}}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip("\x00\n ")
    except OSError:
        return None


def decode(value: int) -> dict[str, Any]:
    """The firmware's bits by name: `now` (set at this moment) and `since_boot`."""
    return {
        "value": value,
        "now": [n for b, n in NOW_BITS.items() if value >> b & 1],
        "since_boot": [n for b, n in NOW_BITS.items() if value >> (b + SINCE_BOOT_SHIFT) & 1],
    }


def from_vcgencmd() -> dict[str, Any] | None:
    tool = shutil.which("vcgencmd")
    if not tool:
        return None
    try:
        text = subprocess.run(
            [tool, "get_throttled"], capture_output=True, text=True, timeout=VCGENCMD_TIMEOUT_S
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return {"source": "vcgencmd get_throttled", "error": str(exc)}
    match = re.search(r"0x([0-9a-fA-F]+)", text)
    if not match:
        return {"source": "vcgencmd get_throttled", "error": f"unreadable answer: {text!r}"}
    return {"source": "vcgencmd get_throttled", "raw": text, **decode(int(match.group(1), 16))}


def from_firmware_sysfs(root: Path) -> dict[str, Any] | None:
    for path in sorted(p for pattern in FIRMWARE_GLOBS for p in glob.glob(str(root / pattern))):
        text = _read(Path(path))
        if text and re.fullmatch(r"(0x)?[0-9a-fA-F]+", text):
            return {"source": str(Path("/") / Path(path).relative_to(root)), "raw": text, **decode(int(text, 16))}
    return None


def _undervoltage(root: Path) -> bool:
    for hwmon in glob.glob(str(root / HWMON_GLOB)):
        if _read(Path(hwmon) / "name") == PI_UNDERVOLT_SENSOR and _read(Path(hwmon) / "in0_lcrit_alarm") == "1":
            return True
    return False


def _capped_policies(root: Path) -> list[str]:
    capped = []
    for policy in sorted(glob.glob(str(root / POLICY_GLOB))):
        cap, hardware = _read(Path(policy) / "scaling_max_freq"), _read(Path(policy) / "cpuinfo_max_freq")
        if cap and hardware and cap.isdigit() and hardware.isdigit() and int(cap) < int(hardware):
            capped.append(f"{Path(policy).name} max {int(cap) // 1000} of {int(hardware) // 1000} MHz")
    return capped


def _hot_zones(root: Path, raspberry_pi: bool) -> list[str]:
    hot = []
    for zone in sorted(glob.glob(str(root / THERMAL_GLOB))):
        temp = _read(Path(zone) / "temp")
        if not temp or not temp.lstrip("-").isdigit():
            continue
        celsius = int(temp) / 1000.0
        limits = [int(t) / 1000.0 for kind, t in _trip_points(Path(zone)) if kind == "passive"]
        if raspberry_pi:
            limits.append(PI_FIRMWARE_THROTTLE_C)
        if limits and celsius >= min(limits):
            hot.append(f"{Path(zone).name} {celsius:.1f} C >= {min(limits):.1f} C")
    return hot


def _trip_points(zone: Path) -> list[tuple[str, str]]:
    points = []
    for kind_file in sorted(zone.glob("trip_point_*_type")):
        temp = _read(kind_file.with_name(kind_file.name.replace("_type", "_temp")))
        if temp and temp.lstrip("-").isdigit():
            points.append((_read(kind_file) or "", temp))
    return points


def from_sysfs(root: Path, raspberry_pi: bool) -> dict[str, Any]:
    """What the kernel shows (source 3 above); `now` holds the firmware's names for the same states."""
    capped, hot = _capped_policies(root), _hot_zones(root, raspberry_pi)
    now = [
        name
        for name, on in (
            ("under-voltage", _undervoltage(root)),
            ("arm frequency capped", bool(capped)),
            ("throttled", bool(hot)),
        )
        if on
    ]
    return {
        "source": "sysfs (hwmon rpi_volt, cpufreq caps, thermal zones)",
        "now": now,
        "since_boot": [],
        "evidence": capped + hot,
    }


def state(root: Path = Path("/"), raspberry_pi: bool = False) -> dict[str, Any]:
    """The first source that answers; a vcgencmd that cannot reach the firmware (no /dev/vchiq in
    a container) falls through to sysfs, its error kept."""
    firmware = from_vcgencmd()
    if firmware and "error" not in firmware:
        return firmware
    found = from_firmware_sysfs(root) or from_sysfs(root, raspberry_pi)
    return {**found, "vcgencmd_error": firmware["error"]} if firmware else found


def new_flags(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What throttled between two looks: states set now, and since-boot bits that were not set."""
    return sorted(
        set(after.get("now", []))
        | {f"{n} occurred" for n in set(after.get("since_boot", [])) - set(before.get("since_boot", []))}
    )


def warning(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """The run's warning when the board was throttled at its start or throttled during it."""
    during, at_start = new_flags(before, after), before.get("now", [])
    if not during and not at_start:
        return None
    parts = ([f"during the run: {', '.join(during)}"] if during else []) + (
        [f"at its start: {', '.join(at_start)}"] if at_start else []
    )
    return f"the board was throttled {'; '.join(parts)} ({after.get('source') or before.get('source')})"


class ThrottleWatch:
    """Looks again after each measurement: a kernel measured while the board throttled is flagged
    (its samples are kept, marked as the GPU timer marks samples under a power limit)."""

    def __init__(self, root: Path = Path("/"), raspberry_pi: bool = False, active: bool = True) -> None:
        self.root, self.raspberry_pi, self.active = root, raspberry_pi, active
        self.last = state(root, raspberry_pi) if active else {}

    def mark(self, info: dict[str, Any]) -> None:
        if not self.active:
            return
        now = state(self.root, self.raspberry_pi)
        flags = new_flags(self.last, now)
        self.last = now
        if flags:
            info["board_throttled"] = {"flags": flags, "source": now.get("source")}
            info["throttled_samples_kept"] = True
