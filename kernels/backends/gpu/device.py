"""The GPU layer's protocol: what every backend that measures on a GPU asks of the run's device, whichever
runtime drives it. One device per run, shared by every backend of the run (a router hands it to the
backends it routes to), so that the warm-up, the clock reader, the energy meter and the measured ceilings
are the run's once. CUDA is the first implementation (cuda/device.py: NVIDIA's GPUs, and AMD's through
PyTorch's ROCm build, which speaks CUDA's API); a HIP one, over AMD's own bindings, would be its sibling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ...precision import Precision
from ...results import Measurement, Settings
from ...timing.stopping import StopRule
from ..contract.base import TimedPart


class GpuDevice(Protocol):
    """One GPU of a run. `device` is the framework's handle of it (a torch.device), `clocks` its clock
    reader (SM and memory clocks, temperature, throttle reasons: kernels/timing/clocks.py), `meter` its
    energy meter under --energy (or why there is none)."""

    device: Any
    clocks: Any
    meter: Any

    def warm(self, info: dict[str, Any]) -> None:
        """Bring the GPU to its working temperature once, before the run's first timing."""

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart, precision: Precision) -> Measurement:
        """Time `fn` (enqueued on the run's stream) with the run's timer; notes go into the part's info."""

    def ceilings(self) -> dict[str, float]:
        """The measured peaks (tflops_<precision>, gbps_copy), measured once per run."""

    def versions(self) -> dict[str, str]:
        """The runtime's and its libraries' versions."""

    def facts(self) -> dict[str, Any]:
        """What the run records of the device (name, memory, clocks, driver, energy meter, clock lock)."""

    def facts_after(self) -> dict[str, Any]:
        """What the run's end changed (the locked clocks given back)."""

    def free_memory_bytes(self) -> int:
        """Device memory free now (a library's workspace is sized from it)."""

    def synchronize(self) -> None:
        """Wait for the device's work to end."""

    def close(self) -> None:
        """The run's end: what was asked of the device for the run given back."""


def open_gpu(settings: Settings, device: Any = None) -> GpuDevice:
    """The run's GPU, through the layer's implementation for its runtime (CUDA's: PyTorch's CUDA and
    ROCm builds alike)."""
    from .cuda.device import CudaDevice

    return CudaDevice(settings, device)
