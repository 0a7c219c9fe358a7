"""The TFLite backend: single-operator .tflite models generated at run time (flatbuffer.py, no
TensorFlow), run by tflite-runtime's interpreter (XNNPACK delegate for what it takes, the builtin
ruy/optimized kernels for the rest), timed with the host clock around `invoke`.

tflite-runtime 2.14 is compiled against numpy 1.x and fails inside numpy 2 (`_ARRAY_API not
found`), so the backend refuses to load there with that reason: the ARM image and the
`.venv-device` environment pin numpy < 2 (README, "Raspberry Pi")."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from ...catalog import Kernel
from ...precision import Precision
from ...results import Measurement, Settings
from ...timing import cpu as cpu_timer
from ...timing.stopping import StopRule
from ..base import Backend, Prepared, TimedPart, Unsupported
from ..board import cpu_facts, facts_after

if int(np.__version__.split(".")[0]) >= 2:
    raise ImportError(f"tflite-runtime 2.14 is built against numpy 1.x and this environment has numpy "
                      f"{np.__version__}: use the ARM image or a numpy<2 environment (.venv-device)")

import tflite_runtime  # noqa: E402 - after the numpy check, which gives the clear reason

from . import conv, gemm, layers, model, rnn, sparse_gemm  # noqa: E402
from .context import TfliteContext  # noqa: E402

OPERATIONS: dict[str, Callable[[TfliteContext, Any, Precision], Prepared]] = {
    "gemm": gemm.prepare, "conv": conv.prepare, "rnn": rnn.prepare, "sparse_gemm": sparse_gemm.prepare,
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

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._facts: dict[str, Any] = {}
        if settings.device not in ("cpu", ""):
            raise RuntimeError(f"the tflite backend runs on the CPU; device '{settings.device}' is not supported")
        self.threads = settings.threads or default_threads()
        self.use_xnnpack = os.environ.get(NO_XNNPACK_ENV) != "1"
        self.ctx = TfliteContext(self.threads, settings.seed, self.use_xnnpack)

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if kernel.op not in OPERATIONS:
            raise Unsupported(f"the tflite backend does not run {kernel.op} (it runs: {', '.join(OPERATIONS)})")
        return OPERATIONS[kernel.op](self.ctx, kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        return cpu_timer.measure(fn, rule, self.settings.min_sample_s)

    def library_versions(self) -> dict[str, str]:
        return {"tflite_runtime": tflite_runtime.__version__, "numpy": np.__version__}

    def device_facts_after(self) -> dict[str, Any]:
        return facts_after(self._facts)

    def device_facts(self) -> dict[str, Any]:
        self._facts = cpu_facts()
        return {**self._facts, "threads": self.threads, "xnnpack_delegate": self.use_xnnpack}
