"""DeepBench's GEMM call, `cublasGemmEx`, on column-major operands.

Column-major C (m x n) = op(A) op(B) with lda = (transa ? k : m), ldb = (transb ? n : k),
ldc = m, exactly as `gemm_bench.cu` called it. Two departures, both stated in the result:
alpha = 1 and beta = 0 (DeepBench passed ints 1 read as floats, a denormal alpha that makes its
outputs zero; beta = 0 overwrites C instead of accumulating into it, so every call computes the
same product), and `fp16` accumulates in fp32 (`CUBLAS_COMPUTE_32F`: DeepBench's stated
minimum of 16-bit multiply / 32-bit accumulate). DeepBench's binary asked for fp16 compute: that call
is the precision `fp16acc16` (`CUBLAS_COMPUTE_16F`, half alpha and beta), asked for by name.

The operands are PyTorch tensors laid out so that their memory is the column-major matrices
(kernels/reference/gemm.py `operands`, which also gives the row-major view the float64 check multiplies)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ... import padding
from ...catalog import GemmKernel
from ...precision import Precision
from ...reference.gemm import operands
from ...reference.torch_checks import check_matmul
from ..contract.base import Prepared, TimedPart, Unsupported
from ..gpu.cuda.fp8_gemm import prepare_fp8
from ..gpu.cuda.native import StreamHandle
from .declaration import CALLS, MATH_MODES

if TYPE_CHECKING:
    from .backend import CublasBackend

WORKSPACE_BYTES = 32 << 20  # cuBLAS's own default on Hopper, given explicitly: a capture must not allocate

OUTPUT_DTYPE = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.FP16ACC16: torch.float16,
    Precision.BF16: torch.bfloat16,
    Precision.INT8: torch.int32,
}
# The precision whose operands another one's are (fp16acc16 stores float16, as fp16 does): what
# TorchContext.dtype gives for them, since PyTorch itself has no fp16-accumulate precision.
STORAGE = {Precision.FP16ACC16: Precision.FP16}
# alpha and beta have the compute type's scalar type (cublasGemmEx's rule): half for fp16 compute.
SCALAR = {"COMPUTE_32I": np.int32, "COMPUTE_16F": np.float16}


def call_types(cublas: Any, precision: Precision) -> tuple[int, int, int, type]:
    """The enum values the binding takes, and the scalar type of alpha and beta."""
    import nvmath

    ab, c, compute = CALLS[precision]
    scalar = SCALAR.get(compute, np.float32)
    return (
        int(getattr(nvmath.CudaDataType, ab)),
        int(getattr(nvmath.CudaDataType, c)),
        int(getattr(cublas.ComputeType, compute)),
        scalar,
    )


def math_mode_text(flags: tuple[str, ...]) -> str:
    """The math mode as the result records it: cuBLAS's C names, or-ed."""
    return " | ".join(f"CUBLAS_{f}" if f == "DEFAULT_MATH" else f"CUBLAS_MATH_{f}" for f in flags)


class Handle(StreamHandle):
    """A cuBLAS handle on torch's current stream, with its own workspace and one math mode
    (declaration.py MATH_MODES): one handle per mode, so that no call changes another's."""

    def __init__(self, cublas: Any, flags: tuple[str, ...]) -> None:
        super().__init__(cublas.create())
        self.cublas = cublas
        mode = 0
        for flag in flags:
            mode |= int(getattr(cublas.Math, flag))
        cublas.set_math_mode(self.handle, mode)
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")

    def on_stream(self, stream: int) -> None:
        # cublasSetStream resets the workspace to the library's default pool: set ours after it.
        self.cublas.set_stream(self.handle, stream)
        self.cublas.set_workspace(self.handle, self.workspace.data_ptr(), WORKSPACE_BYTES)


def prepare(backend: CublasBackend, kernel: GemmKernel, precision: Precision) -> Prepared:
    ctx = backend.ctx
    if precision is Precision.FP8:
        prepared = prepare_fp8(ctx, kernel)
        prepared.parts[0].info["library"] = "cuBLASLt (cublasLtMatmul through torch._scaled_mm: fp8 TN only)"
        return prepared
    if precision not in CALLS:
        raise Unsupported(f"cublasGemmEx has no {precision.value} GEMM")
    listed = {"m": kernel.m, "n": kernel.n, "k": kernel.k}
    shape = padding.resolve(
        ctx.pad, listed, padding.gemm_shape(kernel.m, kernel.n, kernel.k, kernel.a_t, kernel.b_t, precision)
    )
    m, n, k = shape["m"], shape["n"], shape["k"]
    lib = backend.lib
    assert lib is not None, "prepare runs only where the binding loaded (covers() is False without it)"
    ab_type, c_type, compute, scalar = call_types(lib, precision)
    x, y = operands(ctx, m, n, k, kernel.a_t, kernel.b_t, ctx.dtype(STORAGE.get(precision, precision)))
    c = torch.empty((n, m), dtype=OUTPUT_DTYPE[precision], device=ctx.device)  # column-major m x n, ldc = m
    alpha: np.ndarray = np.ones(1, dtype=scalar)
    beta: np.ndarray = np.zeros(1, dtype=scalar)
    op = lib.Operation
    transa, transb = int(op.T if kernel.a_t else op.N), int(op.T if kernel.b_t else op.N)
    algo = int(lib.GemmAlgo.DEFAULT)
    lda, ldb, ldc = (k if kernel.a_t else m), (n if kernel.b_t else k), m
    # y is A's memory (op(A) transposed, row-major), x is B's (see kernels/reference/gemm.py operands).
    a_ptr, b_ptr, c_ptr = y.data_ptr(), x.data_ptr(), c.data_ptr()
    cublas, handle = lib, backend.handle(MATH_MODES[precision])

    def run() -> None:
        cublas.gemm_ex(
            handle.bind(),
            transa,
            transb,
            m,
            n,
            k,
            alpha.ctypes.data,
            a_ptr,
            ab_type,
            lda,
            b_ptr,
            ab_type,
            ldb,
            beta.ctypes.data,
            c_ptr,
            c_type,
            ldc,
            compute,
            algo,
        )

    try:
        run()  # cuBLAS refuses some int8 problems outright (lda, ldb not multiples of 4): unsupported, not failed
    except lib.cuBLASError as exc:
        if "NOT_SUPPORTED" in str(exc):
            raise Unsupported(
                f"cublasGemmEx refuses this {precision.value} problem (lda={lda}, ldb={ldb}): {exc}"
            ) from None
        raise
    part = TimedPart(
        direction="fwd",
        run=run,
        check=lambda: check_matmul(c, x, y, precision, ctx.generator),
        flops=kernel.flops(),
        min_bytes=kernel.min_bytes("fwd", precision),
        info=call_info(kernel, precision, (m, n, k), (lda, ldb, ldc)),
        output=c,
    )
    return Prepared(parts=[part], padding=padding.changed(listed, shape))


def call_info(
    kernel: GemmKernel, precision: Precision, shape: tuple[int, int, int], lds: tuple[int, int, int]
) -> dict[str, object]:
    """What a part records of the call: the library's own (transa, transb, m, n, k, leading dimensions),
    its types and math mode, and the scalars."""
    (m, n, k), (lda, ldb, ldc) = shape, lds
    return {
        "library": "cuBLAS",
        "call": "cublasGemmEx",
        "blas_call": {
            "transa": "T" if kernel.a_t else "N",
            "transb": "T" if kernel.b_t else "N",
            "m": m,
            "n": n,
            "k": k,
            "lda": lda,
            "ldb": ldb,
            "ldc": ldc,
        },
        "types": "A/B {}, C {}, CUBLAS_{}".format(*CALLS[precision]),
        "math_mode": math_mode_text(MATH_MODES[precision]),
        "algo": "CUBLAS_GEMM_DEFAULT (cuBLAS's heuristic; the call does not report its kernel)",
        "alpha": 1,
        "beta": 0,
    }
