"""The torch backend's class: each operation's module (OPERATIONS) on the run's device, timed by the CPU
timer or the GPU layer; the device's facts, versions and ceilings."""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ...catalog import Kernel
from ...collective_kernels import CollectiveKernel
from ...noise import quiet_threads
from ...padding import PadMode
from ...precision import Precision
from ...results import Measurement, Settings
from ...system import cpu_model, last_level_cache_bytes, usable_memory_bytes
from ...timing import cpu as cpu_timer
from ...timing.energy import with_cpu_energy
from ...timing.stopping import StopRule
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from ..gpu.device import GpuDevice, open_gpu
from ..shared.torch_context import TorchContext
from . import (
    attention,
    batched_gemm,
    conv,
    cpu_ceilings,
    elementwise,
    embedding,
    gemm,
    model,
    norms,
    pointwise,
    pooling,
    rnn,
    sparse24_gemm,
    sparse_gemm,
)
from .arm_cpu import ArmCpu, is_arm_cpu

OPERATIONS: dict[str, Callable[[TorchContext, Any, Precision], Prepared]] = {
    "gemm": gemm.prepare,
    "conv": conv.prepare,
    "rnn": rnn.prepare,
    "sparse_gemm": sparse_gemm.prepare,
    "sparse24_gemm": sparse24_gemm.prepare,  # declines: cuSPARSELt's (kernels/backends/cusparselt/)
    # layer benchmarks (kernels/layers.py)
    "pooling": pooling.prepare,
    "batch_norm": norms.prepare_batch_norm,
    "norm": norms.prepare_norm,
    "softmax": pointwise.prepare_softmax,
    "activation": pointwise.prepare_activation,
    "embedding": embedding.prepare,
    "attention": attention.prepare,
    "elementwise": elementwise.prepare,
    "batched_gemm": batched_gemm.prepare,
    "model": model.prepare,  # a whole model's forward pass (kernels/model_kernel.py)
}


class TorchBackend(Backend):
    name = "torch"

    def cpu_threads(self) -> int | None:
        return self.threads

    def __init__(self, settings: Settings, cuda: GpuDevice | None = None) -> None:
        """`cuda`: the run's GPU when another backend shares it (kernels/backends/nvidia/)."""
        super().__init__(settings)
        self.device = torch.device(settings.device)
        self.cuda = cuda or (open_gpu(settings, self.device) if self.device.type == "cuda" else None)
        # CPU threads: as asked, else one per usable CPU less those other processes keep busy (a
        # thread sharing a core with a busy process waits a scheduler slice, 100x the kernel).
        self.threads = settings.threads or (quiet_threads() if self.device.type == "cpu" else None)
        if self.threads:
            torch.set_num_threads(self.threads)
        torch.manual_seed(settings.seed)
        self.ctx = TorchContext(self.device, settings.seed, PadMode(settings.pad), settings.inputs)
        self._ceilings: dict[str, float] | None = None
        self.arm = ArmCpu() if is_arm_cpu(self.device) else None
        if self.ctx.is_cuda:
            # cuDNN's find picks the fastest algorithm per shape at the warm-up call (DeepBench
            # also asked cuDNN for its fastest); PyTorch does not expose which engine it chose.
            torch.backends.cudnn.benchmark = True

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if isinstance(kernel, CollectiveKernel):
            return self._collective(kernel, precision).in_precision(precision)
        if kernel.op not in OPERATIONS:
            raise Unsupported(f"{kernel.op} is not run by the torch backend on one process")
        self.ctx.set_precision_mode(precision)
        if self.arm:
            self.arm.require(precision)
        return OPERATIONS[kernel.op](self.ctx, kernel, precision).in_precision(precision)

    def prepare_unpadded(self, kernel: Kernel, precision: Precision) -> Prepared | None:
        with self.ctx.padding(PadMode.NONE):
            return self.prepare(kernel, precision)

    def _collective(self, kernel: Kernel, precision: Precision) -> Prepared:
        """A collective through torch.distributed on this device (gloo on a CPU, NCCL or RCCL on a
        GPU): one rank unless an engine started several. torch.distributed's own calls, never nccl4py's
        (the nccl backend's choice): the collective layer of distributed/ (common.py, torch_dist.py),
        not the gloo/nccl backends (distributed/torch_backends.py), which no other backend imports."""
        if getattr(self, "_collective_runner", None) is None:
            from ..collectives.common import CollectiveRunner
            from ..collectives.torch_dist import TorchCommunicator

            comm = TorchCommunicator("nccl" if self.settings.device.startswith("cuda") else "gloo", self.settings)
            self._collective_runner = CollectiveRunner(comm, self.settings), comm
        runner, comm = self._collective_runner
        prepared = runner.prepare(kernel, precision)
        prepared.info["library"] = comm.versions()
        return prepared

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        if self.cuda is None:
            measured = cpu_timer.measure(fn, rule, self.settings.min_sample_s)
            if self.settings.energy:
                measured = with_cpu_energy(measured, fn, part.info, self.settings.energy_window_s)
            if self.arm:
                self.arm.after_measure(fn, part)
            return measured
        return self.cuda.measure(fn, rule, part, part.precision)

    def ceilings(self, precisions: Iterable[Precision] = ()) -> dict[str, float]:
        if self.cuda:
            return self.cuda.ceilings()
        if self._ceilings is None:  # with the run's threads, through the GEMM kernels' own code (cpu_ceilings.py)
            # a container's memory limit, not the machine's: the copy's buffers must fit the cgroup
            self._ceilings = cpu_ceilings.measure_cpu_ceilings(self.ctx, precisions, usable_memory_bytes())
        return self._ceilings

    def library_versions(self) -> dict[str, str]:
        if self.cuda:
            return self.cuda.versions()
        versions: dict[str, str] = {"torch": torch.__version__}
        config = torch.__config__.show()
        mkl = re.search(r"Math Kernel Library Version ([\d.]+)", config)
        if mkl:
            versions["mkl"] = mkl.group(1)
        onednn = re.search(r"MKL-DNN v([\d.]+)", config) or re.search(r"oneDNN v([\d.]+)", config)
        if onednn:
            versions["onednn"] = onednn.group(1)
        if self.arm:
            versions.update(self.arm.library_versions())
        return versions

    def device_facts(self) -> dict[str, Any]:
        if self.cuda:
            return self.cuda.facts()
        facts = self.arm.device_facts() if self.arm else {}
        return {
            "kind": "cpu",
            "name": cpu_model(),
            **facts,
            "threads": torch.get_num_threads(),
            "logical_cpus": os.cpu_count(),
            "machine": platform.machine(),
            "capability": torch.backends.cpu.get_cpu_capability(),
            "llc_bytes": last_level_cache_bytes(),
        }

    def device_facts_after(self) -> dict[str, Any]:
        if self.cuda:
            return self.cuda.facts_after()
        return self.arm.facts_after() if self.arm else {}

    def close(self) -> None:
        if self.cuda:
            self.cuda.close()

    def release(self) -> None:
        self.ctx.synchronize()
