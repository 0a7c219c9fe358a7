"""Backends, one per native library, loaded by name so that the host never imports them.

A backend registers in one line: its class ("module:class", imported only when a run uses it,
with its library) and, where it has options, info or delegates, its declaration ("module:NAME",
a light module of its own folder: declaration.py), which the host reads without the library."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module
from typing import Any, NamedTuple

from ..results import Settings
from .contract.base import Backend
from .contract.declaration import BackendDeclaration, NoOptions


class Entry(NamedTuple):
    target: str  # "module:class" of the backend
    declaration: str = ""  # "module:NAME" of its BackendDeclaration ('' : it declares nothing)


B = "deepbench.kernels.backends"
BACKENDS: dict[str, Entry] = {
    "torch": Entry(f"{B}.pytorch.backend:TorchBackend", f"{B}.pytorch.declaration:TORCH"),
    # NVIDIA: each operation on its own library (nvidia/declaration.py), or one library forced for every kernel.
    "nvidia": Entry(f"{B}.nvidia.backend:NvidiaBackend", f"{B}.nvidia.declaration:NVIDIA"),
    "cublas": Entry(f"{B}.cublas.backend:CublasBackend", f"{B}.cublas.declaration:CUBLAS"),
    "cudnn": Entry(f"{B}.cudnn.backend:CudnnBackend", f"{B}.cudnn.declaration:CUDNN"),
    "cusparse": Entry(f"{B}.cusparse.backend:CusparseBackend", f"{B}.cusparse.declaration:CUSPARSE"),
    "cusparselt": Entry(f"{B}.cusparselt.backend:CusparseLtBackend", f"{B}.cusparselt.declaration:CUSPARSELT"),
    # Collectives (all-reduce ...), one rank per process, started by torchrun / mpirun / srun.
    "gloo": Entry(f"{B}.gloo.backend:GlooBackend", f"{B}.gloo.declaration:GLOO"),
    "nccl": Entry(f"{B}.nccl.backend:NcclBackend", f"{B}.nccl.declaration:NCCL"),
    "rccl": Entry(f"{B}.nccl.backend:NcclBackend", f"{B}.nccl.declaration:RCCL"),
    "mpi": Entry(f"{B}.mpi.backend:MpiBackend", f"{B}.mpi.declaration:MPI"),
    "onnxruntime": Entry(f"{B}.onnxruntime.backend:OrtBackend", f"{B}.onnxruntime.declaration:ONNXRUNTIME"),
    "tflite": Entry(f"{B}.tflite.backend:TfliteBackend", f"{B}.tflite.declaration:TFLITE"),
    # Intel: each operation on its own library (oneapi/declaration.py), or one library forced for every kernel.
    "oneapi": Entry(f"{B}.oneapi.backend:OneapiBackend", f"{B}.oneapi.declaration:ONEAPI"),
    "mkl": Entry(f"{B}.mkl.backend:MklBackend", f"{B}.mkl.declaration:MKL"),
    "onednn": Entry(f"{B}.onednn.backend:OnednnBackend", f"{B}.onednn.declaration:ONEDNN"),
}


def register_backend(name: str, target: str, declaration: str = "") -> None:
    """Add a backend ("module:class", imported only when a run uses it) and its declaration
    ("module:NAME", read by the host: options, info; backends/contract/declaration.py): a plugin's or a
    test's backend for an operation registered with kernels.catalog.register_kernel."""
    for what in (target, declaration):
        if what and ":" not in what:
            raise ValueError(f"backend {name}: give 'module:name', not {what!r}")
    BACKENDS[name] = Entry(target, declaration)


def _attribute(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def declaration_of(name: str) -> BackendDeclaration[Any]:
    """What a registered backend declares (nothing, for one with no declaration)."""
    entry = BACKENDS.get(name)
    if entry is None or not entry.declaration:
        return BackendDeclaration(name, NoOptions)
    declared = _attribute(entry.declaration)
    assert isinstance(declared, BackendDeclaration), f"{entry.declaration} is not a BackendDeclaration"
    return declared


def declarations(names: Iterable[str] | None = None) -> list[BackendDeclaration[Any]]:
    """The declarations of these registered backends (None: of all), once each (nccl and rccl
    share theirs), in registry order."""
    found: dict[str, BackendDeclaration[Any]] = {}
    for name in BACKENDS if names is None else names:
        if name in BACKENDS and BACKENDS[name].declaration:
            declared = declaration_of(name)
            found.setdefault(declared.name, declared)
    return list(found.values())


def declared() -> dict[str, BackendDeclaration[Any]]:
    """Every registered backend's declaration, by the backend's name, in registry order (nccl and rccl
    each with their own, though their options share one key)."""
    return {name: declaration_of(name) for name in BACKENDS}


def preferred_backend(platform: str) -> str | None:
    """The backend a platform runs unless --backend names one: the backend whose declaration prefers
    the platform most (the first registered on a tie); None where no backend serves it."""
    ranked = [
        (d.platforms[platform], -i, name) for i, (name, d) in enumerate(declared().items()) if platform in d.platforms
    ]
    return max(ranked)[2] if ranked else None


def declaration_named(key: str) -> BackendDeclaration[Any] | None:
    """The declaration whose options a plan stores under `key` (None: no registered backend's)."""
    return next((d for d in declarations() if d.name == key), None)


def result_backends(plan_backend: str) -> tuple[str, ...]:
    """The backends a result of a plan run on `plan_backend` may name (`deepbench check`)."""
    return (plan_backend, *declaration_of(plan_backend).delegates)


def load_backend(name: str, settings: Settings, **shared: Any) -> Backend:
    """`shared`: what a backend that combines others hands them (the run's GPU: `cuda=`). Raises
    BackendOptionsError where the settings hold options its declaration (or a delegate's) rejects."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}' (choose from: {', '.join(BACKENDS)})")
    for declared in declarations(result_backends(name)):  # a plan's options it would reject: said now
        declared.options_of(settings)
    backend = _attribute(BACKENDS[name].target)(settings, **shared)
    assert isinstance(backend, Backend)
    return backend
