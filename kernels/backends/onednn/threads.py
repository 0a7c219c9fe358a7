"""How many threads oneDNN computes with, set through its threading runtime and read back from it.

oneDNN has no call of its own for this on its CPU runtimes (dnnl_threadpool_interop_* serves the
threadpool runtime only): the runtime it was built with decides. The wheel's build is SYCL, whose
CPU kernels thread through TBB, and a TBB build does the same; TBB's documented control is
`tbb::global_control(max_allowed_parallelism, n)`, an object whose constructor and destructor call
libtbb's exported `tbb::detail::r1::create` / `destroy` on a three-word struct (oneapi/tbb/
global_control.h: value, reserved, parameter), so it is built here in ctypes and kept for the
backend's life; `r1::global_control_active_value` reads back the limit in force. An OpenMP build
takes `omp_set_num_threads` from the OpenMP runtime it loaded. A sequential build runs one thread."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from . import constants as C
from .binding import library_folder

TBB_LIBRARY = "libtbb.so.12"
TBB_CREATE = "_ZN3tbb6detail2r16createERNS0_2d114global_controlE"  # tbb::detail::r1::create(global_control&)
TBB_DESTROY = "_ZN3tbb6detail2r17destroyERNS0_2d114global_controlE"
TBB_ACTIVE_VALUE = "_ZN3tbb6detail2r127global_control_active_valueEi"  # r1::global_control_active_value(int)
TBB_MAX_ALLOWED_PARALLELISM = 0  # global_control::parameter


class GlobalControl(ctypes.Structure):
    """tbb::detail::d1::global_control's members, in order."""

    _fields_ = [("value", ctypes.c_size_t), ("reserved", ctypes.c_ssize_t), ("parameter", ctypes.c_int)]


@dataclass
class Threading:
    """The threading runtime oneDNN computes with, how many threads it may use, and how that was set."""

    runtime: str  # oneDNN's CPU runtime (dnnl_runtime2str of dnnl_version().cpu_runtime)
    threading: str  # the runtime its kernels thread through
    threads: int
    how: str


def limit(cpu_runtime: int, runtime_name: str, threads: int) -> Threading:
    """Limit oneDNN to `threads` threads through its runtime (module docstring)."""
    if cpu_runtime in (C.RUNTIME_TBB, C.RUNTIME_SYCL):
        return _tbb(runtime_name, threads)
    if cpu_runtime == C.RUNTIME_OMP:
        return _openmp(runtime_name, threads)
    if cpu_runtime == C.RUNTIME_SEQ:
        return Threading(runtime_name, "sequential", 1, "a sequential build computes on the calling thread alone")
    return Threading(
        runtime_name, runtime_name, threads, f"not set: oneDNN's {runtime_name} runtime takes no thread count here"
    )


# The process's one global_control: TBB keeps a pointer to it until it is destroyed, and the smallest of the
# controls alive is in force, so a later backend asking another count replaces it (destroyed through TBB first).
_ACTIVE: dict[str, Any] = {}


def _tbb(runtime_name: str, threads: int) -> Threading:
    folder = library_folder()
    tbb = ctypes.CDLL(str(folder / TBB_LIBRARY) if (folder / TBB_LIBRARY).exists() else TBB_LIBRARY)
    create, destroy, active = (getattr(tbb, name) for name in (TBB_CREATE, TBB_DESTROY, TBB_ACTIVE_VALUE))
    create.argtypes = destroy.argtypes = [ctypes.POINTER(GlobalControl)]
    create.restype = destroy.restype = None
    active.argtypes, active.restype = [ctypes.c_int], ctypes.c_size_t
    current = _ACTIVE.get("control")
    if current is None or current.value != threads:
        if current is not None:
            destroy(ctypes.byref(current))
        control = GlobalControl(threads, 0, TBB_MAX_ALLOWED_PARALLELISM)
        create(ctypes.byref(control))
        _ACTIVE["control"] = control
    in_force = int(active(TBB_MAX_ALLOWED_PARALLELISM))
    how = f"tbb::global_control(max_allowed_parallelism, {threads}); TBB reports {in_force} in force"
    return Threading(runtime_name, "TBB", in_force, how)


def _openmp(runtime_name: str, threads: int) -> Threading:
    process = ctypes.CDLL(None)
    try:
        process.omp_set_num_threads(ctypes.c_int(threads))
        in_force = int(process.omp_get_max_threads())
    except AttributeError:
        return Threading(runtime_name, "OpenMP", threads, "not set: no OpenMP runtime is loaded in this process")
    return Threading(
        runtime_name, "OpenMP", in_force, f"omp_set_num_threads({threads}); omp_get_max_threads() = {in_force}"
    )
