"""Batched GEMM (kernels/layers.py BatchedGemmKernel) on oneDNN's matmul primitive, in every precision
oneDNN offers on this CPU.

Why here and not in the MKL backend: MKL's batched GEMM calls (cblas_?gemm_batch, _batch_strided)
exist for float32, float64 and complex only; its bf16, fp16 and int8 GEMMs (cblas_gemm_bf16bf16f32,
_f16f16f32, _s8u8s32) take one matrix per call. oneDNN's matmul takes a batch of matrices in each
of its types, so bf16, fp16 and int8 batched GEMMs have a native call here, and fp32 runs the same
way for comparison. (DeepBench's own GEMM and sparse GEMM are MKL's: kernels/backends/mkl/.)

Each entry is DeepBench's column-major C (m x n) = op(A) op(B), handed to oneDNN without moving a
byte: a column-major matrix is the row-major one of its transpose, so the matmul computes
C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m) on the operands as stored, and a transposed operand is
told by its strides (the `acb` tag: each matrix column-major), oneDNN's way (its matmul has no
transpose flags). int8: int8 x int8 -> int32 (exact, no scales). The check compares the first and the
last entry with a float64 product (exact for int8; Freivalds' check for large ones)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...layers import BatchedGemmKernel
from ...precision import Precision
from ...reference.numpy_checks import check_batched_matmul
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from . import constants as C
from .binding import DnnlError
from .context import OnednnContext
from .objects import Attr, Memory, MemoryDesc, Primitive, created_pd, first_offered, md_format
from .tensors import as_float, stored

# precision -> oneDNN's types of (src, weights, dst)
TYPES = {
    Precision.FP32: (C.F32, C.F32, C.F32),
    Precision.BF16: (C.BF16, C.BF16, C.BF16),
    Precision.FP16: (C.F16, C.F16, C.F16),
    Precision.INT8: (C.S8, C.S8, C.S32),
}


class Operand:
    """One batched operand (b, rows, cols) as the matmul reads it: row-major, or each matrix column-major."""

    def __init__(self, ctx: OnednnContext, logical: np.ndarray, data_type: int, column_major: bool) -> None:
        self.data_type, self.column_major = data_type, column_major
        self.md = MemoryDesc(ctx.lib, logical.shape, data_type, C.TAG_ACB if column_major else C.TAG_ABC)
        self.memory = Memory(ctx.engine, self.md.handle, data_type)
        b, rows, cols = logical.shape
        self.view = self.memory.array((b, cols, rows) if column_major else (b, rows, cols))
        self.values = (
            as_float(stored(logical, data_type), data_type) if data_type in (C.BF16, C.F16, C.F32) else logical
        )
        self.view[...] = stored(self.values.transpose(0, 2, 1) if column_major else self.values, data_type)

    def read(self) -> np.ndarray:
        out = as_float(self.view, self.data_type)
        return out.transpose(0, 2, 1) if self.column_major else out


def _operands(ctx: OnednnContext, kernel: BatchedGemmKernel, precision: Precision) -> tuple[np.ndarray, np.ndarray]:
    """op(B)^T (b, n, k) and op(A)^T (b, k, m): the matmul's source and weights, as logical matrices."""
    b, m, n, k = kernel.batch, kernel.m, kernel.n, kernel.k
    if precision is Precision.INT8:
        return ctx.signed_weights((b, n, k)), ctx.signed_weights((b, k, m))
    return ctx.floats((b, n, k), precision), ctx.floats((b, k, m), precision, scale=k**-0.5)


def prepare(ctx: OnednnContext, kernel: BatchedGemmKernel, precision: Precision) -> Prepared:
    if precision not in TYPES:
        raise Unsupported(f"oneDNN's matmul runs fp32, bf16, fp16 and int8 here; {precision.value} is not one of them")
    missing = ctx.missing_isa(precision)
    if missing:
        raise Unsupported(
            f"oneDNN's {precision.value} matmul needs {missing}; this CPU's ISA in oneDNN is {ctx.isa_name}"
        )
    src_t, wei_t, dst_t = TYPES[precision]
    x, y = _operands(ctx, kernel, precision)
    # C^T = op(B)^T op(A)^T: B^T is B's storage read row-major unless b_t; A^T is A's unless a_t (module docstring).
    src, wei = Operand(ctx, x, src_t, kernel.b_t), Operand(ctx, y, wei_t, kernel.a_t)
    dst = Operand(ctx, np.zeros((kernel.batch, kernel.n, kernel.m), dtype=np.float32), dst_t, False)
    attr = Attr(ctx.lib)
    try:
        pd = created_pd(
            ctx.lib,
            "dnnl_matmul_primitive_desc_create",
            ctx.lib.dnnl_matmul_primitive_desc_create,
            ctx.engine.handle,
            src.md.handle,
            wei.md.handle,
            None,
            dst.md.handle,
            attr.handle,
        )
    except DnnlError as exc:
        raise Unsupported(f"oneDNN has no {precision.value} matmul for this batched GEMM here: {exc}") from None
    pd, offered = first_offered(pd)
    primitive = Primitive(ctx.engine, pd, {C.ARG_SRC: src.memory, C.ARG_WEIGHTS: wei.memory, C.ARG_DST: dst.memory})

    def check() -> Check:
        return check_batched_matmul(dst.read(), src.values, wei.values, precision, ctx.rng)

    formats = {role: md_format(ctx.lib, o.md.handle) for role, o in (("src", src), ("weights", wei), ("dst", dst))}
    record: dict[str, Any] = {
        "implementation": pd.impl,
        "chosen_by": "oneDNN's first implementation",
        "candidates": offered,
        "formats": formats,
        **ctx.facts,
    }
    info = {
        "library": "oneDNN",
        "primitive": "matmul",
        "onednn": record,
        "operands": "as stored: column-major C^T = op(B)^T op(A)^T",
    }
    part = TimedPart(
        "fwd", primitive.run, check, kernel.flops(), kernel.min_bytes("fwd", precision), info=info, capturable=False
    )
    part.output = _Output(dst)
    primitive.keep = (attr, pd)  # type: ignore[attr-defined]
    return Prepared(parts=[part])


class _Output:
    """The result as the harness poisons it (kernels/inputs.py `poison`)."""

    def __init__(self, operand: Operand) -> None:
        self.operand = operand
        self.dtype = np.dtype(np.int32 if operand.data_type == C.S32 else np.float32)

    def fill(self, value: float) -> None:
        self.operand.view[...] = stored(
            np.full(self.operand.view.shape, value, dtype=np.float32), self.operand.data_type
        )
