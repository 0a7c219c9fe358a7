"""The onnxruntime backend's class: each operation's single-operator model (OPERATIONS) on the CPU execution
provider, timed by the CPU layer (cpu/runtime.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import onnxruntime as ort

from ...precision import Precision
from ...results import Settings
from ..contract.base import Prepared
from ..cpu.runtime import CpuRuntimeBackend
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


class OrtBackend(CpuRuntimeBackend):
    name = "onnxruntime"
    operations: ClassVar[Mapping[str, Callable[[Any, Any, Precision], Prepared]]] = OPERATIONS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.context = OrtContext(
            SessionOptions(threads=self.threads, provider=CPU_PROVIDER), settings.seed, settings.inputs
        )

    def library_versions(self) -> dict[str, str]:
        return {"onnxruntime": ort.__version__, "onnx": _onnx_version()}

    def runtime_facts(self) -> dict[str, Any]:
        return {"execution_provider": CPU_PROVIDER, "available_providers": ort.get_available_providers()}


def _onnx_version() -> str:
    import onnx

    return onnx.__version__
