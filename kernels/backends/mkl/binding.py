"""MKL's C API through ctypes, over its single dynamic library `libmkl_rt.so.3` as the `mkl` wheel lays it out
(`<prefix>/lib`, cpu/wheel_libraries.py): no compiler at install time, and the library receives exactly the
arguments DeepBench's Intel benchmarks passed it (the CBLAS and sparse routines below, with MKL's own C types).

The single dynamic library picks its interface and threading layers at the first call: LP64 (32-bit MKL_INT,
which every prototype here assumes), and the threading layer MKL_THREADING_LAYER names, else Intel's OpenMP
(what DeepBench linked: libmkl_intel_thread with libiomp5). Both are set before anything else is called, and
the layer in effect is what `mkl_set_threading_layer` answers. Where the library is missing or cannot load,
`load` says so in one line, with what to install."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..cpu.wheel_libraries import wheel_library_dirs, wheel_library_folder

LIBRARY = "libmkl_rt.so.3"
THREADING_ENV = "MKL_THREADING_LAYER"
# mkl_service.h: MKL_INTERFACE_LP64 and the MKL_THREADING_* codes, by the names MKL_THREADING_LAYER takes.
INTERFACE_LP64 = 0
THREADING_LAYERS = {"intel": 0, "sequential": 1, "gnu": 3, "tbb": 4}
DEFAULT_THREADING = "intel"
# With GNU OpenMP already in the process (PyTorch's libgomp: the oneapi backend runs what MKL and oneDNN do not on
# PyTorch), MKL's Intel OpenMP layer gives wrong results (measured here: a sparse product off by 0.9 in relative
# error, then a crash, with libgomp and libiomp5 both loaded); its GNU layer shares the runtime that is there.
GNU_OPENMP = "libgomp"
PROC_MAPS = "/proc/self/maps"
VERSION_CHARS = 256

# mkl_cblas.h enums.
COL_MAJOR = 102
NO_TRANS, TRANS = 111, 112
FIX_OFFSET = 173
PACKED = 151
A_MATRIX, B_MATRIX = 161, 162
# mkl_spblas.h enums.
SPARSE_SUCCESS = 0
SPARSE_INDEX_BASE_ZERO = 0
SPARSE_OPERATION = {False: 10, True: 11}  # NON_TRANSPOSE, TRANSPOSE
SPARSE_MATRIX_TYPE_GENERAL = 20
SPARSE_FILL_MODE_UPPER = 41
SPARSE_DIAG_NON_UNIT = 50
SPARSE_LAYOUT = {"row": 101, "column": 102}
SPARSE_STATUS = {
    1: "SPARSE_STATUS_NOT_INITIALIZED",
    2: "SPARSE_STATUS_ALLOC_FAILED",
    3: "SPARSE_STATUS_INVALID_VALUE",
    4: "SPARSE_STATUS_EXECUTION_FAILED",
    5: "SPARSE_STATUS_INTERNAL_ERROR",
    6: "SPARSE_STATUS_NOT_SUPPORTED",
}

INT, FLT, PTR, I8, SIZE = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int8, ctypes.c_size_t
# The argument types of each routine family (mkl_cblas.h, LP64), by the routines that share them.
# layout, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc
FLOAT_GEMM = (INT, INT, INT, INT, INT, INT, FLT, PTR, INT, PTR, INT, FLT, PTR, INT)
# layout, transa, transb, offsetc, m, n, k, alpha, A, lda, ao, B, ldb, bo, beta, C, ldc, co
INT_GEMM = (INT, INT, INT, INT, INT, INT, INT, FLT, PTR, INT, I8, PTR, INT, I8, FLT, PTR, INT, PTR)
PACK_SIZE = (INT, INT, INT, INT)  # identifier, m, n, k
# layout, identifier, trans, m, n, k, alpha, src, ld, dest (the integer and 16-bit routines take no alpha)
SGEMM_PACK = (INT, INT, INT, INT, INT, INT, FLT, PTR, INT, PTR)
TYPED_PACK = (INT, INT, INT, INT, INT, INT, PTR, INT, PTR)
# layout, transa, transb, m, n, k, A, lda, B, ldb, beta, C, ldc (alpha went into the packed A)
SGEMM_COMPUTE = (INT, INT, INT, INT, INT, INT, PTR, INT, PTR, INT, FLT, PTR, INT)
PROTOTYPES: dict[str, tuple[tuple[type, ...], type | None]] = {
    "cblas_sgemm": (FLOAT_GEMM, None),
    "cblas_gemm_bf16bf16f32": (FLOAT_GEMM, None),
    "cblas_gemm_f16f16f32": (FLOAT_GEMM, None),
    "cblas_gemm_s8u8s32": (INT_GEMM, None),
    "cblas_sgemm_pack_get_size": (PACK_SIZE, SIZE),
    "cblas_gemm_s8u8s32_pack_get_size": (PACK_SIZE, SIZE),
    "cblas_gemm_bf16bf16f32_pack_get_size": (PACK_SIZE, SIZE),
    "cblas_gemm_f16f16f32_pack_get_size": (PACK_SIZE, SIZE),
    "cblas_sgemm_pack": (SGEMM_PACK, None),
    "cblas_gemm_s8u8s32_pack": (TYPED_PACK, None),
    "cblas_gemm_bf16bf16f32_pack": (TYPED_PACK, None),
    "cblas_gemm_f16f16f32_pack": (TYPED_PACK, None),
    "cblas_sgemm_compute": (SGEMM_COMPUTE, None),
    "cblas_gemm_s8u8s32_compute": (INT_GEMM, None),
    "cblas_gemm_bf16bf16f32_compute": (FLOAT_GEMM, None),
    "cblas_gemm_f16f16f32_compute": (FLOAT_GEMM, None),
}


class MatrixDescr(ctypes.Structure):
    """mkl_spblas.h's `struct matrix_descr`, passed by value."""

    _fields_ = [("type", ctypes.c_int), ("mode", ctypes.c_int), ("diag", ctypes.c_int)]


SPARSE_PROTOTYPES: dict[str, tuple[tuple[type, ...], type | None]] = {
    # A*, indexing, rows, cols, rows_start, rows_end, col_indx, values
    "mkl_sparse_s_create_csr": ((ctypes.POINTER(PTR), INT, INT, INT, PTR, PTR, PTR, PTR), INT),
    # A, op, descr, layout, columns of the dense matrix, expected calls
    "mkl_sparse_set_mm_hint": ((PTR, INT, MatrixDescr, INT, INT, INT), INT),
    "mkl_sparse_set_mv_hint": ((PTR, INT, MatrixDescr, INT), INT),  # A, op, descr, expected calls
    "mkl_sparse_optimize": ((PTR,), INT),
    # op, alpha, A, descr, layout, x, columns, ldx, beta, y, ldy
    "mkl_sparse_s_mm": ((INT, FLT, PTR, MatrixDescr, INT, PTR, INT, INT, FLT, PTR, INT), INT),
    "mkl_sparse_s_mv": ((INT, FLT, PTR, MatrixDescr, PTR, FLT, PTR), INT),  # op, alpha, A, descr, x, beta, y
    "mkl_sparse_destroy": ((PTR,), INT),
}


class MklVersion(ctypes.Structure):
    """mkl_types.h's MKLVersion: `Processor` names the code path MKL dispatched to on this CPU."""

    _fields_ = [
        ("major", ctypes.c_int),
        ("minor", ctypes.c_int),
        ("update", ctypes.c_int),
        ("patch", ctypes.c_int),
        ("product_status", ctypes.c_char_p),
        ("build", ctypes.c_char_p),
        ("processor", ctypes.c_char_p),
        ("platform", ctypes.c_char_p),
    ]


class MklMissing(Exception):
    """MKL's library is not here, or cannot load (the message says which, in one line)."""


@dataclass(frozen=True)
class Runtime:
    """What MKL says of itself after the backend configured it."""

    version: str  # mkl_get_version_string
    threading_layer: str  # the layer in effect (mkl_set_threading_layer's answer)
    threads: int  # mkl_get_max_threads after mkl_set_num_threads
    dynamic: bool  # mkl_get_dynamic: whether MKL may use fewer threads than that on a small problem
    isa: str  # MKLVersion.Processor: the instruction set of the code path in effect
    library: str  # the file loaded


def gnu_openmp_loaded() -> bool:
    """Whether this process has GNU's OpenMP runtime mapped (PyTorch imported)."""
    try:
        return GNU_OPENMP in Path(PROC_MAPS).read_text()
    except OSError:  # not Linux
        return False


class Mkl:
    """The loaded library: each routine with its prototype, and the service calls the backend makes."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise MklMissing(f"MKL's {LIBRARY} cannot load: {exc}") from None
        for name, (args, result) in {**PROTOTYPES, **SPARSE_PROTOTYPES}.items():
            fn = getattr(self.lib, name)
            fn.argtypes, fn.restype = args, result
        self.lib.MKL_Set_Interface_Layer.argtypes = (INT,)
        self.lib.MKL_Set_Threading_Layer.argtypes = (INT,)
        self.lib.MKL_Set_Num_Threads.argtypes = (INT,)
        self.lib.MKL_Get_Version_String.argtypes = (ctypes.c_char_p, INT)
        self.lib.dsecnd.restype = ctypes.c_double
        self.lib.MKL_Set_Interface_Layer(INTERFACE_LP64)
        self.threading_layer = self._set_threading_layer()

    def _set_threading_layer(self) -> str:
        """MKL_THREADING_LAYER's layer, set before any other call; where unset, DeepBench's Intel OpenMP, or GNU
        OpenMP where the process already holds it (GNU_OPENMP says why)."""
        default = "gnu" if gnu_openmp_loaded() else DEFAULT_THREADING
        asked = os.environ.get(THREADING_ENV, default).strip().lower()
        if asked not in THREADING_LAYERS:
            raise MklMissing(f"{THREADING_ENV}={asked!r} is not one of MKL's layers ({', '.join(THREADING_LAYERS)})")
        code = self.lib.MKL_Set_Threading_Layer(THREADING_LAYERS[asked])
        return next((name for name, c in THREADING_LAYERS.items() if c == code), f"code {code}")

    def set_threads(self, threads: int) -> None:
        self.lib.MKL_Set_Num_Threads(threads)

    def version_string(self) -> str:
        buf = ctypes.create_string_buffer(VERSION_CHARS)
        self.lib.MKL_Get_Version_String(buf, VERSION_CHARS)
        return buf.value.decode(errors="replace").strip()

    def version(self) -> MklVersion:
        v = MklVersion()
        self.lib.MKL_Get_Version(ctypes.byref(v))
        return v

    def runtime(self) -> Runtime:
        v = self.version()
        return Runtime(
            version=self.version_string(),
            threading_layer=self.threading_layer,
            threads=int(self.lib.MKL_Get_Max_Threads()),
            dynamic=bool(self.lib.MKL_Get_Dynamic()),
            isa=(v.processor or b"").decode(errors="replace").strip(),
            library=self.path,
        )

    def release_number(self) -> str:
        """MKL's version as its releases are numbered (2026.2), with the build date."""
        v = self.version()
        return f"{v.major}.{v.update} (build {(v.build or b'').decode()})"

    def sparse(self, name: str, *args: object) -> None:
        """Call a sparse routine; a status other than success raises, naming the routine and the status."""
        status = getattr(self.lib, name)(*args)
        if status != SPARSE_SUCCESS:
            raise RuntimeError(f"{name} returned {SPARSE_STATUS.get(status, status)}")


def general_descr() -> MatrixDescr:
    """The descriptor spmm_bench.cpp passed: a general matrix (fill mode and diagonal as it set them)."""
    return MatrixDescr(SPARSE_MATRIX_TYPE_GENERAL, SPARSE_FILL_MODE_UPPER, SPARSE_DIAG_NON_UNIT)


@cache
def load() -> Mkl:
    """The library from the wheel's folder, else wherever the loader finds it; MklMissing says where it looked."""
    wheel = wheel_library_folder(LIBRARY) / LIBRARY
    if wheel.is_file():
        return Mkl(str(wheel))
    try:
        return Mkl(LIBRARY)  # LD_LIBRARY_PATH, the system's MKL
    except MklMissing:
        looked = ", ".join(str(d) for d in wheel_library_dirs())
        raise MklMissing(f"MKL's {LIBRARY} is not installed (looked in {looked} and the loader's path)") from None
