"""The tflite backend's class: each operation's single-operator model (OPERATIONS) in LiteRT's interpreter,
timed by the CPU layer (cpu/runtime.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import ai_edge_litert
import numpy as np

from ...precision import Precision
from ...results import Settings
from ..contract.base import Prepared
from ..cpu.runtime import CpuRuntimeBackend
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


class TfliteBackend(CpuRuntimeBackend):
    name = "tflite"
    operations: ClassVar[Mapping[str, Callable[[Any, Any, Precision], Prepared]]] = OPERATIONS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.use_xnnpack = os.environ.get(NO_XNNPACK_ENV) != "1"
        self.context = TfliteContext(self.threads, settings.seed, self.use_xnnpack, settings.inputs)

    def library_versions(self) -> dict[str, str]:
        return {"ai_edge_litert": ai_edge_litert.__version__, "numpy": np.__version__}

    def runtime_facts(self) -> dict[str, Any]:
        return {"runtime": f"LiteRT {ai_edge_litert.__version__}", "xnnpack_delegate": self.use_xnnpack}
