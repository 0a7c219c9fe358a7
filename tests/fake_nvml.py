"""A fake of the pynvml module (nvidia-ml-py) for the energy, clock and clock-lock tests: the
functions, constants and errors of its real API that the harness calls, on one GPU whose time
is a fake clock. The energy counter moves in steps of `period_s`, as the board's does."""

from __future__ import annotations

import math
from types import SimpleNamespace

# nvidia-ml-py's values (pynvml.py)
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8


class NVMLError(Exception):
    """pynvml.NVMLError: its `value` is the nvmlReturn_t code."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_NO_PERMISSION: "Insufficient Permissions"}.get(
            self.value, f"NVML error {self.value}"
        )


class FakeTime:
    """A clock that moves `step_s` every time it is read (the host's polling costs time)."""

    def __init__(self, step_s: float = 0.0002) -> None:
        self.t, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        self.t += self.step_s
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class FakeNvml:
    """One GPU drawing `watts`, its energy counter updated every `period_s` (millijoules)."""

    NVML_CLOCK_GRAPHICS = NVML_CLOCK_GRAPHICS
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NO_PERMISSION = NVML_ERROR_NO_PERMISSION
    NVMLError = NVMLError

    def __init__(
        self,
        clock: FakeTime,
        watts: float = 650.0,
        period_s: float = 0.02,
        sm_mhz: int = 1980,
        reasons: int = SW_POWER_CAP,
        lock_error: int | None = None,
        energy: bool = True,
        power_bias: float = 1.0,
        instant: bool = True,
    ) -> None:
        self.clock, self.watts, self.period_s = clock, watts, period_s
        self.sm_mhz, self.reasons, self.lock_error, self.energy = sm_mhz, reasons, lock_error, energy
        self.power_bias = power_bias  # the power reading's error against the counter (a sensor's)
        self.instant = instant  # whether the driver gives NVML_FI_DEV_POWER_INSTANT
        self.start_mj = 123_456_789
        self.locked: tuple[int, int] | None = None
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"handle-{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if not self.energy:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        updated = math.floor(self.clock.t / self.period_s) * self.period_s
        return self.start_mj + int(updated * self.watts * 1000)

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return int(self.watts * self.power_bias * 1000)

    def nvmlDeviceGetFieldValues(self, handle: str, field_ids: list[int]) -> list[SimpleNamespace]:
        """pynvml's c_nvmlFieldValue_t array: here NVML_FI_DEV_POWER_INSTANT (186) in milliwatts, an
        unsigned int (valueType 1); NOT_SUPPORTED per field on a driver without it."""
        return [
            SimpleNamespace(
                fieldId=f,
                nvmlReturn=NVML_SUCCESS if self.instant and f == 186 else NVML_ERROR_NOT_SUPPORTED,
                valueType=1,
                value=SimpleNamespace(uiVal=int(self.watts * self.power_bias * 1000)),
            )
            for f in field_ids
        ]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        return 700_000

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:
        return 61

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        if clock == NVML_CLOCK_MEM:
            return 2619
        return self.locked[1] if self.locked else self.sm_mhz

    def nvmlDeviceGetMaxClockInfo(self, handle: str, clock: int) -> int:
        return 2619 if clock == NVML_CLOCK_MEM else 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return self.reasons

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: str) -> list[int]:
        return [2619]

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: str, mem_mhz: int) -> list[int]:
        return list(range(1980, 344, -15))

    def nvmlDeviceSetGpuLockedClocks(self, handle: str, low: int, high: int) -> None:
        self.calls.append(f"lock {low} {high}")
        if self.lock_error is not None:
            raise NVMLError(self.lock_error)
        self.locked = (low, high)

    def nvmlDeviceResetGpuLockedClocks(self, handle: str) -> None:
        self.calls.append("reset")
        self.locked = None
