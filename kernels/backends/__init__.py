"""Backends, one per native library, loaded by name so that the host never imports them."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ..results import Settings
from .base import Backend

# name -> "module:class"; a backend's module imports its library, so import only when used.
BACKENDS: dict[str, str] = {
    "torch": "deepbench.kernels.backends.pytorch:TorchBackend",
    # NVIDIA: each operation on its own library (nvidia.py), or one library forced for every kernel.
    "nvidia": "deepbench.kernels.backends.nvidia:NvidiaBackend",
    "cublas": "deepbench.kernels.backends.cublas:CublasBackend",
    "cudnn": "deepbench.kernels.backends.cudnn:CudnnBackend",
    "cusparse": "deepbench.kernels.backends.cusparse:CusparseBackend",
    "cusparselt": "deepbench.kernels.backends.cusparselt:CusparseLtBackend",
    # Collectives (all-reduce), one rank per process, started by torchrun / mpirun / srun.
    "gloo": "deepbench.kernels.backends.distributed.torch_backends:GlooBackend",
    "nccl": "deepbench.kernels.backends.distributed.torch_backends:NcclBackend",
    "rccl": "deepbench.kernels.backends.distributed.torch_backends:NcclBackend",
    "mpi": "deepbench.kernels.backends.distributed.mpi:MpiBackend",
    "onnxruntime": "deepbench.kernels.backends.onnxruntime:OrtBackend",
    "tflite": "deepbench.kernels.backends.tflite:TfliteBackend",
}


# A backend that picks a library per kernel (nvidia.py), and the backends its results may name.
DELEGATES: dict[str, tuple[str, ...]] = {"nvidia": ("cublas", "cudnn", "cusparse", "cusparselt", "torch")}


def result_backends(plan_backend: str) -> tuple[str, ...]:
    """The backends a result of a plan run on `plan_backend` may name (`deepbench check`)."""
    return (plan_backend, *DELEGATES.get(plan_backend, ()))


def register_backend(name: str, target: str) -> None:
    """Add a backend ("module:class", imported only when a run uses it): a plugin's or a test's
    backend for an operation registered with kernels.catalog.register_kernel."""
    if ":" not in target:
        raise ValueError(f"backend {name}: give 'module:class', not {target!r}")
    BACKENDS[name] = target


def load_backend(name: str, settings: Settings, **shared: Any) -> Backend:
    """`shared`: what a backend that combines others hands them (the run's GPU: `cuda=`)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}' (choose from: {', '.join(BACKENDS)})")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(import_module(module), cls)(settings, **shared)
