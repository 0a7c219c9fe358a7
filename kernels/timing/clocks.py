"""The GPU's SM clock, slowdown reasons, temperature and maximum clocks, read through NVML
(nvidia-ml-py, optional: without it a measurement has no clock figures).

The measurement reads the clock during every sample, after the host has enqueued it and before
it waits for it, so the reading is taken while the GPU runs the sample (a reading after the wait
would see an idle GPU's clock recovering). A reading is a point, not an average over the sample;
settling.py decides what the readings mean. Beside the clock a reading holds the board's
instantaneous power (NVML_FI_DEV_POWER_INSTANT; never the 1 s average, which lags a new load) over
its enforced limit, read once: settling.calm reads it."""

from __future__ import annotations

from typing import Any

import torch

from .meters import MW_PER_W, instant_power_w
from .settling import ClockReading

# NVML's clock event reason bits that slow the SM clock (idle and application-clock settings left out)
SLOWDOWN_REASONS = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
}


class ClockReader:
    """SM clock and throttle reasons through NVML (nvidia-ml-py), if it is installed."""

    def __init__(self, device: torch.device) -> None:
        self.handle: Any = None
        self.nvml: Any = None
        self.max_seen = 0.0
        self._limit_w: float | None = None
        try:
            import pynvml  # optional: nvidia-ml-py

            pynvml.nvmlInit()
            props = torch.cuda.get_device_properties(device)
            uuid = getattr(props, "uuid", None)
            handle = None
            if uuid is not None:
                try:
                    handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
                except pynvml.NVMLError:
                    handle = None
            self.handle = handle or pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
            self.nvml = pynvml
        except Exception:  # noqa: BLE001 - clocks are optional; no NVML means no clock figures
            self.handle = None

    @classmethod
    def of(cls, nvml: Any, handle: Any) -> ClockReader:
        """A reader on an NVML module and device handle already opened (tests pass a fake module)."""
        reader = cls.__new__(cls)
        reader.nvml, reader.handle, reader.max_seen, reader._limit_w = nvml, handle, 0.0, None
        return reader

    @property
    def available(self) -> bool:
        return self.handle is not None

    def figure(self, function: str, *args: Any) -> float | None:
        """One number from an NVML device query (`function` of pynvml, called on this device's handle
        and `args`); None without NVML or where the query fails (an older GPU or driver lacks it)."""
        if not self.available:
            return None
        try:
            return float(getattr(self.nvml, function)(self.handle, *args))
        except Exception:  # noqa: BLE001 - every figure is optional
            return None

    def sm_mhz(self) -> float | None:
        mhz = self.figure("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM) if self.available else None
        if mhz is not None:
            self.max_seen = max(self.max_seen, mhz)
        return mhz

    def mem_mhz(self) -> float | None:
        """The memory clock now (what bounds a bandwidth-bound kernel, as the SM clock bounds the others)."""
        return self.figure("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_MEM) if self.available else None

    def throttle_reasons(self) -> list[str] | None:
        """Names of active thermal/power slowdown reasons (idle and app-clock settings excluded);
        None where NVML cannot say."""
        if not self.available:
            return None
        n = self.nvml
        try:
            fn = (
                getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or n.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            mask = int(fn(self.handle))
        except Exception:  # noqa: BLE001
            return None
        return [name for name, bit in SLOWDOWN_REASONS.items() if mask & bit]

    def power_share(self) -> float | None:
        """The board's instantaneous power over its enforced limit now; None where NVML gives either not."""
        if not self.available:
            return None
        if self._limit_w is None:
            limit = self.figure("nvmlDeviceGetEnforcedPowerLimit")
            self._limit_w = limit / MW_PER_W if limit else 0.0
        watts = instant_power_w(self.nvml, self.handle) if self._limit_w else None
        return None if watts is None else watts / self._limit_w

    def reading(self) -> ClockReading:
        """The SM clock, the slowdown reasons and the power's share of its limit now (taken while a sample runs)."""
        reasons = self.throttle_reasons()
        return ClockReading(self.sm_mhz(), None if reasons is None else tuple(reasons), self.power_share())

    def temperature_c(self) -> float | None:
        return self.figure("nvmlDeviceGetTemperature", self.nvml.NVML_TEMPERATURE_GPU) if self.available else None

    def max_clocks(self) -> dict[str, float]:
        if not self.available:
            return {}
        n = self.nvml
        out = {}
        for key, clock in (("sm_max_mhz", n.NVML_CLOCK_SM), ("mem_max_mhz", n.NVML_CLOCK_MEM)):
            try:
                out[key] = float(n.nvmlDeviceGetMaxClockInfo(self.handle, clock))
            except Exception:  # noqa: BLE001
                pass
        return out
