"""oneDNN's C API through ctypes: the library found and loaded, its functions typed, and every
status checked.

Where the library is: Intel's `onednn` wheel puts libdnnl.so.3 in `<prefix>/lib` (cpu/wheel_libraries.py), beside the
runtimes it links (libtbb.so.12 from the `tbb` wheel, Intel's compiler runtime libintlc, libsvml,
libirng, libimf, the memory framework libumf, and, for a SYCL build, libsycl.so.9 from
`intel-sycl-rt`). That folder is not on the loader's path, so each is loaded first by its full path
with RTLD_GLOBAL (PRELOAD, in dependency order), and libdnnl's own lookups then find them loaded.

The wheel's oneDNN (3.13) is a SYCL build: `dnnl_version()` reports cpu_runtime 512, which
dnnl_config.h names DNNL_RUNTIME_SYCL (its threading runtime, DNNL_CPU_THREADING_RUNTIME, is TBB).
Its CPU engine is a SYCL CPU device, which the SYCL runtime finds through the OpenCL CPU runtime of
the `intel-opencl-rt` wheel (libintelocl.so). That wheel's ICD file names the path of the build
machine (/opt/anaconda1anaconda2anaconda3/lib/libintelocl.so), so the OpenCL loader finds no CPU
device (`dnnl_engine_get_count(cpu)` = 0) unless OCL_ICD_FILENAMES names the installed library:
`load` sets it, where the user has not, before the SYCL runtime first looks (a user's own value is
kept). Without oneDNN, or where it cannot load, `load` says what is missing and what to install,
and the backend reports every kernel unsupported with that line."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import POINTER, c_char_p, c_float, c_int, c_int64, c_size_t, c_uint, c_void_p
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cpu.wheel_libraries import wheel_library_folder
from . import constants as C

LIBRARY = "libdnnl.so.3"
# Loaded before libdnnl, in this order (each one's own dependencies first); those absent are skipped:
# a build with another runtime (OpenMP, sequential) links fewer of them.
PRELOAD = (
    "libtbb.so.12",
    "libintlc.so.5",
    "libsvml.so",
    "libirng.so",
    "libimf.so",
    "libumf.so.1",
    "libsycl.so.9",
)
OPENCL_CPU_RUNTIME = "libintelocl.so"  # intel-opencl-rt: the SYCL runtime's CPU device
OPENCL_ICD_VARIABLE = "OCL_ICD_FILENAMES"

handle = c_void_p
dims_t = c_int64 * C.MAX_NDIMS


class ExecArg(ctypes.Structure):
    """dnnl_exec_arg_t: one argument of an execution (its DNNL_ARG_* and its memory)."""

    _fields_ = [("arg", c_int), ("memory", c_void_p)]


class Version(ctypes.Structure):
    """dnnl_version_t."""

    _fields_ = [
        ("major", c_int),
        ("minor", c_int),
        ("patch", c_int),
        ("hash", c_char_p),
        ("cpu_runtime", c_uint),
        ("gpu_runtime", c_uint),
    ]


P = POINTER
md_t, pd_t, attr_t = c_void_p, c_void_p, c_void_p
_CONV_TAIL = [dims_t, dims_t, dims_t, dims_t]  # strides, dilates, padding_l, padding_r
# name -> (restype, argtypes): every function the backend calls, as dnnl.h, dnnl_common.h and dnnl_debug.h declare it.
PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "dnnl_version": (P(Version), []),
    "dnnl_get_effective_cpu_isa": (c_int, []),
    "dnnl_cpu_isa2str": (c_char_p, [c_int]),
    "dnnl_runtime2str": (c_char_p, [c_uint]),
    "dnnl_status2str": (c_char_p, [c_int]),
    "dnnl_alg_kind2str": (c_char_p, [c_int]),
    "dnnl_dt2str": (c_char_p, [c_int]),
    "dnnl_engine_get_count": (c_size_t, [c_int]),
    "dnnl_engine_create": (c_int, [P(handle), c_int, c_size_t]),
    "dnnl_engine_destroy": (c_int, [handle]),
    "dnnl_stream_create": (c_int, [P(handle), handle, c_uint]),
    "dnnl_stream_wait": (c_int, [handle]),
    "dnnl_stream_destroy": (c_int, [handle]),
    "dnnl_get_default_fpmath_mode": (c_int, [P(c_int)]),
    "dnnl_memory_desc_create_with_tag": (c_int, [P(md_t), c_int, dims_t, c_int, c_int]),
    "dnnl_memory_desc_destroy": (c_int, [md_t]),
    "dnnl_memory_desc_clone": (c_int, [P(md_t), md_t]),
    "dnnl_memory_desc_query": (c_int, [md_t, c_int, c_void_p]),
    "dnnl_memory_desc_equal": (c_int, [md_t, md_t]),
    "dnnl_memory_desc_get_size": (c_size_t, [md_t]),
    "dnnl_memory_create": (c_int, [P(handle), md_t, handle, c_void_p]),
    "dnnl_memory_get_data_handle": (c_int, [handle, P(c_void_p)]),
    "dnnl_memory_destroy": (c_int, [handle]),
    "dnnl_primitive_attr_create": (c_int, [P(attr_t)]),
    "dnnl_primitive_attr_destroy": (c_int, [attr_t]),
    "dnnl_primitive_attr_set_scratchpad_mode": (c_int, [attr_t, c_int]),
    "dnnl_primitive_attr_set_fpmath_mode": (c_int, [attr_t, c_int]),
    "dnnl_primitive_attr_set_scales_mask": (c_int, [attr_t, c_int, c_int]),
    "dnnl_primitive_desc_next_impl": (c_int, [pd_t]),
    "dnnl_primitive_desc_clone": (c_int, [P(pd_t), pd_t]),
    "dnnl_primitive_desc_destroy": (c_int, [pd_t]),
    "dnnl_primitive_desc_query": (c_int, [pd_t, c_int, c_int, c_void_p]),
    "dnnl_primitive_desc_query_md": (md_t, [pd_t, c_int, c_int]),
    "dnnl_primitive_create": (c_int, [P(handle), pd_t]),
    "dnnl_primitive_execute": (c_int, [handle, handle, c_int, P(ExecArg)]),
    "dnnl_primitive_destroy": (c_int, [handle]),
    "dnnl_reorder_primitive_desc_create": (c_int, [P(pd_t), md_t, handle, md_t, handle, attr_t]),
    "dnnl_convolution_forward_primitive_desc_create": (
        c_int,
        [P(pd_t), handle, c_int, c_int, md_t, md_t, md_t, md_t, *_CONV_TAIL, attr_t],
    ),
    "dnnl_convolution_backward_data_primitive_desc_create": (
        c_int,
        [P(pd_t), handle, c_int, md_t, md_t, md_t, *_CONV_TAIL, pd_t, attr_t],
    ),
    "dnnl_convolution_backward_weights_primitive_desc_create": (
        c_int,
        [P(pd_t), handle, c_int, md_t, md_t, md_t, md_t, *_CONV_TAIL, pd_t, attr_t],
    ),
    "dnnl_matmul_primitive_desc_create": (c_int, [P(pd_t), handle, md_t, md_t, md_t, md_t, attr_t]),
    "dnnl_vanilla_rnn_forward_primitive_desc_create": (
        c_int,
        [P(pd_t), handle, c_int, c_int, c_int, *[md_t] * 7, c_uint, c_float, c_float, attr_t],
    ),
    "dnnl_vanilla_rnn_backward_primitive_desc_create": (
        c_int,
        [P(pd_t), handle, c_int, c_int, c_int, *[md_t] * 14, c_uint, c_float, c_float, pd_t, attr_t],
    ),
    "dnnl_lstm_forward_primitive_desc_create": (c_int, [P(pd_t), handle, c_int, c_int, *[md_t] * 11, c_uint, attr_t]),
    "dnnl_lstm_backward_primitive_desc_create": (
        c_int,
        [P(pd_t), handle, c_int, c_int, *[md_t] * 22, c_uint, pd_t, attr_t],
    ),
    "dnnl_lbr_gru_forward_primitive_desc_create": (c_int, [P(pd_t), handle, c_int, c_int, *[md_t] * 7, c_uint, attr_t]),
    "dnnl_lbr_gru_backward_primitive_desc_create": (
        c_int,
        [P(pd_t), handle, c_int, c_int, *[md_t] * 14, c_uint, pd_t, attr_t],
    ),
}


class DnnlError(RuntimeError):
    """A oneDNN call that did not succeed: `status` is its dnnl_status_t."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    @property
    def unimplemented(self) -> bool:
        """oneDNN has no implementation of the call's problem here (dnnl_unimplemented)."""
        return self.status == C.UNIMPLEMENTED


@dataclass(frozen=True)
class Loaded:
    """libdnnl with its functions typed ('' missing), or why it cannot be used (`missing`)."""

    lib: Any = None
    folder: str = ""
    missing: str = ""


def library_folder() -> Path:
    """Where pip's wheels put libdnnl and its runtimes (cpu/wheel_libraries.py: the environment's, then its base's)."""
    return wheel_library_folder(LIBRARY)


def _point_opencl_at(folder: Path) -> None:
    """OCL_ICD_FILENAMES names the OpenCL CPU runtime the wheels installed (module docstring), unless set."""
    runtime = folder / OPENCL_CPU_RUNTIME
    if runtime.exists() and not os.environ.get(OPENCL_ICD_VARIABLE):
        os.environ[OPENCL_ICD_VARIABLE] = str(runtime)


def not_installed(install_hint: str) -> str:
    """Why oneDNN is not installed here ('' where its library is in the environment's lib folder or on the
    loader's path), found without loading it."""
    if (library_folder() / LIBRARY).exists() or ctypes.util.find_library("dnnl"):
        return ""
    return (
        f"oneDNN is not installed ({LIBRARY} is neither in {library_folder()} nor on the loader's path); {install_hint}"
    )


def load(install_hint: str) -> Loaded:
    """libdnnl from the environment's lib folder (its runtimes loaded first), else from the loader's path."""
    folder = library_folder()
    candidates = [folder / LIBRARY] if (folder / LIBRARY).exists() else []
    if not candidates:
        candidates = [Path(LIBRARY)]  # the loader's own path (LD_LIBRARY_PATH, a system install)
    _point_opencl_at(folder)
    for name in PRELOAD:
        if (folder / name).exists():
            try:
                ctypes.CDLL(str(folder / name), mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                return Loaded(missing=f"oneDNN's runtime {name} cannot load: {exc}")
    try:
        lib = ctypes.CDLL(str(candidates[0]))  # its own symbols stay local: only its runtimes are global
    except OSError as exc:
        if not (folder / LIBRARY).exists():
            return Loaded(missing=not_installed(install_hint) or f"oneDNN ({LIBRARY}) cannot load: {exc}")
        return Loaded(missing=f"oneDNN ({folder / LIBRARY}) cannot load: {exc}")
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            return Loaded(missing=f"oneDNN ({candidates[0]}) has no {name}: a oneDNN 3.x is needed; {install_hint}")
        fn.restype, fn.argtypes = restype, argtypes
    return Loaded(lib=lib, folder=str(candidates[0].parent) if candidates[0].parent != Path() else "")


def text(value: bytes | None) -> str:
    return value.decode() if value else ""


def check(lib: Any, status: int, what: str) -> None:
    """DnnlError naming the call and oneDNN's word for its status, unless it succeeded."""
    if status != C.SUCCESS:
        raise DnnlError(f"{what}: {text(lib.dnnl_status2str(status))}", status)


def dims(values: tuple[int, ...] | list[int]) -> Any:
    """A dnnl_dims_t holding `values` (the rest zero)."""
    if len(values) > C.MAX_NDIMS:
        raise ValueError(f"oneDNN takes at most {C.MAX_NDIMS} dimensions, not {len(values)}")
    return dims_t(*values)
