"""The tflite backend's class: each operation's single-operator model (OPERATIONS) in LiteRT's interpreter,
timed by the CPU layer (cpu/runtime.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import ai_edge_litert
import numpy as np

from ...catalog import Kernel
from ...precision import Precision
from ...results import Measurement, Settings
from ...timing import cpu as cpu_timer
from ...timing.energy import with_cpu_energy
from ...timing.stopping import StopRule
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from ..cpu.board import BoardMonitor
from . import conv, gemm, layers, model, rnn, sparse_gemm
from .context import TfliteContext

OPERATIONS: dict[str, Callable[[TfliteContext, Any, Precision], Prepared]] = {
    "gemm": gemm.prepare,
    "conv": conv.prepare,
    "rnn": rnn.prepare,
    "sparse_gemm": sparse_gemm.prepare,
    **layers.OPERATIONS,  # layer benchmarks (kernels/layers.py); those with no builtin operator say why
    "model": model.prepare,  # whole models: unsupported, with the reason (model.py)
}
NO_XNNPACK_ENV = "DEEPBENCH_TFLITE_NO_XNNPACK"  # "1": builtin kernels only (ruy), for comparison


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class TfliteBackend(Backend):
    name = "tflite"

    def cpu_threads(self) -> int | None:
        return self.threads

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        if settings.device not in ("cpu", ""):
            raise RuntimeError(f"the tflite backend runs on the CPU; device '{settings.device}' is not supported")
        self.threads = settings.threads or default_threads()
        self.use_xnnpack = os.environ.get(NO_XNNPACK_ENV) != "1"
        self.ctx = TfliteContext(self.threads, settings.seed, self.use_xnnpack, settings.inputs)
        self.board = BoardMonitor()

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if kernel.op not in OPERATIONS:
            raise Unsupported(f"the tflite backend does not run {kernel.op} (it runs: {', '.join(OPERATIONS)})")
        return OPERATIONS[kernel.op](self.ctx, kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        measured = cpu_timer.measure(fn, rule, self.settings.min_sample_s)
        if self.settings.energy:
            measured = with_cpu_energy(measured, fn, part.info, self.settings.energy_window_s)
        self.board.mark(part.info)
        return measured

    def library_versions(self) -> dict[str, str]:
        return {"ai_edge_litert": ai_edge_litert.__version__, "numpy": np.__version__}

    def device_facts_after(self) -> dict[str, Any]:
        return self.board.after()

    def device_facts(self) -> dict[str, Any]:
        return {
            **self.board.facts,
            "threads": self.threads,
            "runtime": f"LiteRT {ai_edge_litert.__version__}",
            "xnnpack_delegate": self.use_xnnpack,
        }
