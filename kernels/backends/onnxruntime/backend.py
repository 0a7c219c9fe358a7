"""The onnxruntime backend's class: each operation's single-operator model (OPERATIONS) on the CPU execution
provider, timed by the CPU layer (cpu/runtime.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import onnxruntime as ort

from ...catalog import Kernel
from ...precision import Precision
from ...results import Measurement, Settings
from ...timing import cpu as cpu_timer
from ...timing.energy import with_cpu_energy
from ...timing.stopping import StopRule
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from ..cpu.board import BoardMonitor
from . import attention, conv, gemm, layers, model, rnn, sparse_gemm
from .context import OrtContext
from .session import SessionOptions

CPU_PROVIDER = "CPUExecutionProvider"
OPERATIONS: dict[str, Callable[[OrtContext, Any, Precision], Prepared]] = {
    "gemm": gemm.prepare,
    "conv": conv.prepare,
    "rnn": rnn.prepare,
    "sparse_gemm": sparse_gemm.prepare,
    # layer benchmarks (kernels/layers.py)
    "pooling": layers.prepare_pooling,
    "batch_norm": layers.prepare_batch_norm,
    "norm": layers.prepare_norm,
    "softmax": layers.prepare_softmax,
    "activation": layers.prepare_activation,
    "embedding": layers.prepare_embedding,
    "attention": attention.prepare,
    "elementwise": layers.prepare_elementwise,
    "batched_gemm": layers.prepare_batched_gemm,
    "model": model.prepare,  # a whole model exported by torch.onnx (kernels/model_kernel.py)
}


def default_threads() -> int:
    """Settings.threads = 0 means: one intra-op thread per usable CPU (recorded, not guessed)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class OrtBackend(Backend):
    name = "onnxruntime"

    def cpu_threads(self) -> int | None:
        return self.threads

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        if settings.device not in ("cpu", ""):
            raise RuntimeError(
                f"the onnxruntime backend runs on the CPU execution provider; device "
                f"'{settings.device}' is not supported"
            )
        self.threads = settings.threads or default_threads()
        self.ctx = OrtContext(
            SessionOptions(threads=self.threads, provider=CPU_PROVIDER), settings.seed, settings.inputs
        )
        self.board = BoardMonitor()

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if kernel.op not in OPERATIONS:
            raise Unsupported(f"the onnxruntime backend does not run {kernel.op} (it runs: {', '.join(OPERATIONS)})")
        return OPERATIONS[kernel.op](self.ctx, kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        measured = cpu_timer.measure(fn, rule, self.settings.min_sample_s)
        if self.settings.energy:
            measured = with_cpu_energy(measured, fn, part.info, self.settings.energy_window_s)
        self.board.mark(part.info)
        return measured

    def library_versions(self) -> dict[str, str]:
        return {"onnxruntime": ort.__version__, "onnx": _onnx_version()}

    def device_facts_after(self) -> dict[str, Any]:
        return self.board.after()

    def device_facts(self) -> dict[str, Any]:
        return {
            **self.board.facts,
            "threads": self.threads,
            "execution_provider": CPU_PROVIDER,
            "available_providers": ort.get_available_providers(),
        }


def _onnx_version() -> str:
    import onnx

    return onnx.__version__
