"""The GPU one run measures on, shared by every CUDA backend (PyTorch, cuBLAS, cuDNN, cuSPARSE).

Every backend times its calls the same way: it hands `measure` a call that runs on PyTorch's
current stream, and the GPU timer (kernels/timing/cuda.py, with the strategy kernels/timing/
strategy.py picks: CUDA-graph replays timed by events, CUPTI kernel time for short calls, cold,
the eager fallback; and the profiler cross-check) measures it. A backend only says how to run,
check and cost its call. One `CudaDevice` per run, so the warm-up, the clock reader and the
measured ceilings are done once, whichever library runs the first kernel, and all the GPU work of
the run goes on one stream (timing/work_stream.py says why)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ....precision import Precision
from ....results import Measurement, Settings
from ....timing import cuda as cuda_timer
from ....timing import cupti
from ....timing.clock_lock import ClockLock
from ....timing.clocks import ClockReader
from ....timing.energy import update_period
from ....timing.meters import Meter, nvml_meter
from ....timing.stopping import StopRule
from ....timing.warmup import warm_up
from ....timing.work_stream import use_work_stream
from ...contract.base import TimedPart
from . import facts as cuda_facts


def set_torch_precision_mode(precision: Precision) -> None:
    """TF32 only when asked for; half types accumulate in float32 (no reduced-precision
    reductions), as DeepBench's 16-bit-multiply / 32-bit-accumulate rule requires, except in
    fp16acc16, which asks for fp16 accumulate (PyTorch 2.7's allow_fp16_accumulation, where the build
    has it: only the ceilings' GEMM is PyTorch's in that precision, cuda_facts.py)."""
    tf32 = precision is Precision.TF32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    if hasattr(torch.backends.cuda.matmul, cuda_facts.FP16_ACCUMULATION):
        setattr(torch.backends.cuda.matmul, cuda_facts.FP16_ACCUMULATION, precision is Precision.FP16ACC16)


class CudaDevice:
    """Warm-up, timing, ceilings and facts of one CUDA device, for every backend of a run: the GPU
    layer's protocol (gpu/device.py) on CUDA."""

    def __init__(self, settings: Settings, device: torch.device | None = None) -> None:
        self.settings = settings
        self.device = device or torch.device(settings.device)
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device is visible to PyTorch (torch.cuda.is_available() is False)")
        self.stream = use_work_stream(self.device)  # before any GPU work of the run
        self.clocks = ClockReader(self.device)
        # --lock-clocks: asked once for the run, released by close() (and at exit, on signals)
        self.lock = ClockLock(self.clocks, settings.lock_clocks) if settings.lock_clocks is not None else None
        # --energy: the board's energy counter (kernels/timing/meters.py), or why there is none
        self.meter: Meter | str | None = nvml_meter(self.clocks) if settings.energy else None
        self._warmed = False
        self._ceilings: dict[str, float] | None = None
        self._versions: dict[str, str] | None = None

    def warm(self, info: dict[str, Any]) -> None:
        """Before the run's first GPU timing (a measurement, or timing candidate engines): bring the
        GPU to its working temperature once (timing/warmup.py); what it did goes into `info`."""
        if self._warmed:
            return
        self._warmed = True
        if self.settings.warm_up_s > 0:
            info["device_warm_up"] = warm_up(
                self.device,
                self.clocks.temperature_c,
                self.settings.warm_up_s,
                meanwhile=cupti.start_once if self.settings.kernel_time and not self.settings.cold else lambda: None,
            )

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart, precision: Precision) -> Measurement:
        """Time `fn` (enqueued on torch's current stream) with the run's timer; the notes and the
        roofline bound go into the part's info."""
        self.warm(part.info)
        m, notes = cuda_timer.measure(fn, rule, self.settings, part.capturable, self.device, self.clocks, self.meter)
        part.info.update(notes)
        bound = cuda_facts.roofline(part.flops, part.min_bytes, m.stats.median, precision, self.ceilings())
        if bound:
            part.info["roofline"] = bound
        return m

    def ceilings(self) -> dict[str, float]:
        if self._ceilings is None:
            self._ceilings = {}  # measured once; empty while measuring (no roofline for the ceilings)
            self._ceilings = cuda_facts.measure_ceilings(
                self.device, self.settings, self.clocks, set_torch_precision_mode
            )
        return self._ceilings

    def versions(self) -> dict[str, str]:
        if self._versions is None:
            self._versions = cuda_facts.library_versions()
        return dict(self._versions)

    def facts(self) -> dict[str, Any]:
        facts = cuda_facts.device_facts(self.device, self.clocks)
        if self.meter is not None:  # --energy: how often the counter moves, measured here, or why no meter
            facts["energy_meter"] = (
                self.meter
                if isinstance(self.meter, str)
                else {
                    "meter": self.meter.name,
                    "update_period_s": update_period(self.meter),
                    "power_limit_w": self.meter.power_limit_w(),
                }
            )
        if self.lock is not None:
            facts["clock_lock"] = dict(self.lock.record)
        return facts

    def close(self) -> None:
        """The run's end: locked clocks given back."""
        if self.lock is not None:
            self.lock.release()

    def facts_after(self) -> dict[str, Any]:
        """What the run's end changed: whether the locked clocks were given back."""
        return {"clock_lock": dict(self.lock.record)} if self.lock is not None else {}

    def free_memory_bytes(self) -> int:
        free, _total = torch.cuda.mem_get_info(self.device)
        return int(free)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)
