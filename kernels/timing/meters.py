"""Energy and power meters: NVIDIA's NVML counter, a CPU's RAPL package counters (Linux powercap),
a Raspberry Pi 5's PMIC rails (`vcgencmd pmic_read_adc`). energy.py reads them around a loop of calls.

A meter is a cumulative energy counter (`energy_j`: NVML, RAPL), or only an instantaneous power
reading (`power_w`: the Pi 5's PMIC, whose rails are sampled and integrated). Where a machine has
no meter this process can read, `cpu_meter` returns the reason instead (absent, root-only, a Pi 4).

Limits, stated where they are read:
- NVML's counter (nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver loaded) is the
  board's energy, updated every few tens of milliseconds (energy.update_period measures it);
- NVML's power reading: nvmlDeviceGetPowerUsage is, on Ampere (but GA100) and newer GPUs, an average
  over the last second, which lags a changing load (integrated over a 1 s window on an H200 it read
  0.80-1.17 of the counter), so the instantaneous field NVML_FI_DEV_POWER_INSTANT is sampled where
  the driver offers it (the reading named in each record's `power_reading`);
- RAPL's package domain counts the CPU package (cores, caches, uncore), not DRAM or the board;
  since Linux 5.10 (CVE-2020-8694) energy_uj is readable by root only;
- the Pi 5's PMIC rails are the SoC's and the memory's supplies after the 5 V input: the sum of
  V x I per rail leaves out the USB ports, the fan and the converters' losses.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..results import PowerState

if TYPE_CHECKING:  # clocks.py imports torch, which a CPU board's backends (LiteRT, onnxruntime) run without
    from .clocks import ClockReader

MJ_PER_J = 1000.0
FI_DEV_POWER_INSTANT = 186  # nvml.h's NVML_FI_DEV_POWER_INSTANT (pynvml names it from 12.535 on)
POWER_INSTANT = "nvml-instant"  # NVML_FI_DEV_POWER_INSTANT, milliwatts
POWER_AVERAGE = "nvml-average"  # nvmlDeviceGetPowerUsage: a 1 s average on Ampere and newer (not GA100)
# c_nvmlValue_t's member for each nvmlValueType_t (NVML_VALUE_TYPE_DOUBLE = 0, ... UNSIGNED_SHORT = 6)
NVML_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
MW_PER_W = 1000.0
UJ_PER_J = 1e6
POWERCAP = Path("/sys/class/powercap")
RAPL_PACKAGE = re.compile(r"^intel-rapl:\d+$")  # package zones; intel-rapl:N:M are their sub-domains
DEVICE_TREE_MODEL = Path("/proc/device-tree/model")
PMIC_COMMAND = ("vcgencmd", "pmic_read_adc")
VCGENCMD_TIMEOUT_S = 5
# `   VDD_CORE_A current(7)=2.60838000A` and `   VDD_CORE_V volt(15)=0.84216190V`
PMIC_LINE = re.compile(r"^\s*(?P<rail>\S+)_(?P<kind>[AV])\s+(?:current|volt)\(\d+\)=(?P<value>[-\d.eE+]+)[AV]\s*$")


class Meter(Protocol):
    """What energy.py reads: a counter in joules, power in watts, or both (None: not readable)."""

    name: str
    power_reading: str  # which power reading power_w() gives ("" where there is none)

    def energy_j(self) -> float | None: ...

    def power_w(self) -> float | None: ...

    def state(self) -> PowerState: ...

    def power_limit_w(self) -> float | None: ...


def instant_power_w(nvml: Any, handle: Any) -> float | None:
    """NVML_FI_DEV_POWER_INSTANT in watts; None where the driver or GPU does not give it."""
    try:
        (field,) = nvml.nvmlDeviceGetFieldValues(
            handle, [getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", FI_DEV_POWER_INSTANT)]
        )
        if field.nvmlReturn != 0:  # NVML_SUCCESS
            return None
        return float(getattr(field.value, NVML_VALUE_MEMBERS[field.valueType])) / MW_PER_W
    except Exception:  # noqa: BLE001 - an older driver: the averaged reading instead
        return None


class NvmlMeter:
    """An NVIDIA GPU's board energy counter and power reading, on the run's clock reader's NVML handle."""

    name = "nvml-total-energy"

    def __init__(self, clocks: ClockReader) -> None:
        self.clocks = clocks
        self.power_reading = POWER_INSTANT if self._instant_w() is not None else POWER_AVERAGE

    def _instant_w(self) -> float | None:
        return instant_power_w(self.clocks.nvml, self.clocks.handle)

    def _scaled(self, function: str, per_unit: float) -> float | None:
        value = self.clocks.figure(function)
        return None if value is None else value / per_unit

    def energy_j(self) -> float | None:
        """None on a GPU without the counter (before Volta)."""
        return self._scaled("nvmlDeviceGetTotalEnergyConsumption", MJ_PER_J)

    def power_w(self) -> float | None:
        if self.power_reading == POWER_INSTANT:
            return self._instant_w()
        return self._scaled("nvmlDeviceGetPowerUsage", MW_PER_W)

    def power_limit_w(self) -> float | None:
        return self._scaled("nvmlDeviceGetEnforcedPowerLimit", MW_PER_W)

    def state(self) -> PowerState:
        reasons = self.clocks.throttle_reasons()
        return PowerState(
            temperature_c=self.clocks.temperature_c(),
            sm_mhz=self.clocks.sm_mhz(),
            mem_mhz=self.clocks.mem_mhz(),
            power_w=self.power_w(),
            throttle=None if reasons is None else tuple(reasons),
        )


def nvml_meter(clocks: ClockReader) -> NvmlMeter | str:
    """The GPU's meter, or why there is none."""
    if not clocks.available:
        return "NVML is not available (nvidia-ml-py not installed, or no NVML device handle)"
    meter = NvmlMeter(clocks)
    if meter.energy_j() is None:
        return "this GPU has no total-energy counter (nvmlDeviceGetTotalEnergyConsumption: Volta and newer)"
    return meter


class RaplMeter:
    """The CPU packages' RAPL energy counters, summed, each unwrapped at its max_energy_range_uj."""

    name = "rapl-package"
    power_reading = ""  # a counter only

    def __init__(self, zones: list[Path]) -> None:
        self.zones = zones
        self.ranges = [int((z / "max_energy_range_uj").read_text()) for z in zones]
        self.last = [self._raw(z) for z in zones]
        self.wraps_uj = [0] * len(zones)

    @staticmethod
    def _raw(zone: Path) -> int:
        return int((zone / "energy_uj").read_text())

    def energy_j(self) -> float | None:
        total = 0
        for i, zone in enumerate(self.zones):
            try:
                raw = self._raw(zone)
            except (OSError, ValueError):
                return None
            if raw < self.last[i]:  # the counter wrapped past max_energy_range_uj
                self.wraps_uj[i] += self.ranges[i] + 1
            self.last[i] = raw
            total += raw + self.wraps_uj[i]
        return total / UJ_PER_J

    def power_w(self) -> float | None:
        return None

    def power_limit_w(self) -> float | None:
        return None

    def state(self) -> PowerState:
        return PowerState()


def rapl_meter(powercap: Path = POWERCAP) -> RaplMeter | str:
    """The package counters under `powercap`, or why they cannot be read."""
    zones = sorted(z for z in powercap.glob("intel-rapl:*") if RAPL_PACKAGE.match(z.name)) if powercap.is_dir() else []
    if not zones:
        return (
            f"no RAPL package counter: {powercap} has no intel-rapl:N zone (not an x86 CPU, the intel_rapl "
            "driver not loaded, or a virtual machine)"
        )
    unreadable = [z for z in zones if not os.access(z / "energy_uj", os.R_OK)]
    if unreadable:
        return (
            f"RAPL's {unreadable[0] / 'energy_uj'} is readable by root only (Linux 5.10 and later, "
            "CVE-2020-8694): run as root, or grant read access to energy_uj"
        )
    try:
        return RaplMeter(zones)
    except (OSError, ValueError) as exc:
        return f"RAPL's counters cannot be read: {exc}"


def parse_pmic(text: str) -> dict[str, float]:
    """Watts per rail from `vcgencmd pmic_read_adc`: each rail's current (_A) times its voltage (_V);
    rails with a voltage but no current (EXT5V, BATT) are left out."""
    amps: dict[str, float] = {}
    volts: dict[str, float] = {}
    for line in text.splitlines():
        m = PMIC_LINE.match(line)
        if m:
            (amps if m["kind"] == "A" else volts)[m["rail"]] = float(m["value"])
    return {rail: amps[rail] * volts[rail] for rail in amps if rail in volts}


class PmicMeter:
    """A Raspberry Pi 5's PMIC rails: power only (no counter), sampled and integrated by energy.py."""

    name = "pi5-pmic"
    power_reading = "pi5-pmic-rails"  # vcgencmd pmic_read_adc, V x I summed over the rails

    def __init__(self, read: Callable[[], str]) -> None:
        self.read = read

    def energy_j(self) -> float | None:
        return None

    def power_w(self) -> float | None:
        try:
            rails = parse_pmic(self.read())
        except (OSError, subprocess.SubprocessError):
            return None
        return sum(rails.values()) if rails else None

    def power_limit_w(self) -> float | None:
        return None

    def state(self) -> PowerState:
        return PowerState(power_w=self.power_w())


def run_pmic_read_adc() -> str:
    return subprocess.run(PMIC_COMMAND, capture_output=True, text=True, timeout=VCGENCMD_TIMEOUT_S, check=True).stdout


def pi_meter(
    model: str, read: Callable[[], str] = run_pmic_read_adc, which: Callable[[str], str | None] = shutil.which
) -> PmicMeter | str:
    """A Raspberry Pi's meter (`model`: the device tree's model line), or why it has none."""
    if "Raspberry Pi 5" not in model:
        return (
            f"a {model.split(' Rev')[0]} has no power meter (only the Raspberry Pi 5's PMIC reports its "
            "rails, through vcgencmd pmic_read_adc)"
        )
    if which(PMIC_COMMAND[0]) is None:
        return "vcgencmd is not installed here (Raspberry Pi OS ships it; a container needs it mounted)"
    meter = PmicMeter(read)
    if meter.power_w() is None:
        return "vcgencmd pmic_read_adc gave no rail currents and voltages (firmware too old?)"
    return meter


def cpu_meter(model_file: Path = DEVICE_TREE_MODEL, powercap: Path = POWERCAP, **pi: Any) -> Meter | str:
    """This CPU's meter: a Raspberry Pi's PMIC where the device tree names a Pi, else RAPL."""
    try:
        model = model_file.read_text(errors="replace").strip("\x00\n ")
    except OSError:
        model = ""
    if "Raspberry Pi" in model:
        return pi_meter(model, **pi)
    return rapl_meter(powercap)
