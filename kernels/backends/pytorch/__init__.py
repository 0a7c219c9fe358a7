"""The PyTorch backend: one backend for the native libraries PyTorch calls on its device
(MKL and oneDNN on a CPU; cuBLAS/cuBLASLt, cuDNN and cuSPARSE on an NVIDIA GPU; the ROCm
libraries on an AMD GPU). One module per operation; this class dispatches and times."""

from __future__ import annotations

import os
import platform
import re
from typing import Any, Callable

import torch

from ...catalog import Kernel
from ...precision import Precision
from ...results import Measurement, Settings
from ...timing import cpu as cpu_timer
from ...timing.stopping import StopRule
from ..base import Backend, Prepared, TimedPart, Unsupported
from . import conv, gemm, rnn, sparse_gemm
from .context import TorchContext

OPERATIONS: dict[str, Callable[[TorchContext, Any, Precision], Prepared]] = {
    "gemm": gemm.prepare,
    "conv": conv.prepare,
    "rnn": rnn.prepare,
    "sparse_gemm": sparse_gemm.prepare,
}


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.device = torch.device(settings.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("no CUDA device is visible to PyTorch (torch.cuda.is_available() is False)")
        if settings.threads:
            torch.set_num_threads(settings.threads)
        torch.manual_seed(settings.seed)
        self.ctx = TorchContext(self.device, settings.seed)

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if kernel.op not in OPERATIONS:
            raise Unsupported(f"{kernel.op} is not run by the torch backend on one process "
                              "(all-reduce needs the distributed launcher)")
        self.ctx.set_precision_mode(precision)
        return OPERATIONS[kernel.op](self.ctx, kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        return cpu_timer.measure(fn, rule, self.settings.min_sample_s)

    def library_versions(self) -> dict[str, str]:
        versions = {"torch": torch.__version__}
        config = torch.__config__.show()
        mkl = re.search(r"Math Kernel Library Version ([\d.]+)", config)
        if mkl:
            versions["mkl"] = mkl.group(1)
        onednn = re.search(r"MKL-DNN v([\d.]+)", config) or re.search(r"oneDNN v([\d.]+)", config)
        if onednn:
            versions["onednn"] = onednn.group(1)
        return versions

    def device_facts(self) -> dict[str, Any]:
        return {"kind": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(),
                "logical_cpus": os.cpu_count(), "machine": platform.machine(),
                "capability": torch.backends.cpu.get_cpu_capability()}

    def release(self) -> None:
        self.ctx.synchronize()


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
