"""Dense GEMM on MKL: DeepBench's Intel call (code/intel/gemm/bench.cpp), column-major C (m x n) = op(A) op(B).

MKL receives DeepBench's problem: CblasColMajor, transa and transb as the kernel lists them, m, n and k as
listed (DeepBench's Intel benchmark padded no dimension), and the leading dimensions its code computed for
each layout (operands.py Layout: FIX_LD). fp32 is cblas_sgemm; int8 cblas_gemm_s8u8s32 (A int8, B uint8,
C int32, CblasFixOffset with ao = bo = co = 0, as bench.cpp's IGEMM_S8U8S32 build); bf16 and fp16
cblas_gemm_bf16bf16f32 and cblas_gemm_f16f16f32 (float32 C), only on a CPU with their instructions. Under
--mkl-gemm packed, A and B are packed once here, outside the timed call (bench.cpp's PACKED_API: sgemm_pack
of both), and the timed call is the routine's _compute on the packed matrices.

One departure, stated in each result: beta = 0 (bench.cpp passed alpha = beta = 1, so its calls accumulated
into C; beta = 0 overwrites C, and every call computes the same product). The column-major memory is read
by the float64 check as row-major views: C^T (n x m) = op(B)^T op(A)^T (kernels/reference/numpy_checks.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...catalog import GemmKernel
from ...precision import Precision
from ...reference.numpy_checks import check_matmul
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from . import binding as b
from .context import MklContext
from .declaration import CALLS, GemmCall, MklBlasCall, MklPartInfo
from .operands import STORAGE, Layout, aligned, as_numbers

DEPARTURE = "beta = 0 (DeepBench's bench.cpp passed beta = 1, accumulating into C); alpha = 1 as bench.cpp"
INT8_OFFSETS = "CblasFixOffset, ao = bo = 0, co = 0 (bench.cpp's IGEMM_S8U8S32)"
INT8_RANGES = "A int8 over [-128, 127], B uint8 over [0, 127] (exact without VNNI too: operands.py)"
WIDE_OUTPUT = "float32 C: MKL's 16-bit GEMMs have no 16-bit output"
MEMORY = "4 KiB-aligned (bench.cpp's mkl_malloc alignment)"


@dataclass
class Operands:
    """A, B and C in MKL's column-major memory, and the row-major views the check multiplies:
    out (n x m) = x (n x k) @ y (k x m), out being C^T, x op(B)^T and y op(A)^T."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    x: np.ndarray
    y: np.ndarray
    out: np.ndarray


class Bound:
    """A routine and its arguments, holding the buffers they point to (packed matrices, offsets)."""

    def __init__(self, fn: Callable[..., object], args: tuple[Any, ...], keep: list[np.ndarray]) -> None:
        self.fn, self.args, self.keep = fn, args, keep

    def __call__(self) -> object:
        return self.fn(*self.args)


def operands(ctx: MklContext, kernel: GemmKernel, precision: Precision, layout: Layout) -> Operands:
    """Each stored matrix is (its columns, its leading dimension) row-major: column-major with that ld.
    Every element is drawn, the rows past the matrix (the padding FIX_LD adds) included, as bench.cpp did."""
    m, n, k = kernel.m, kernel.n, kernel.k
    a_type, b_type, c_type = STORAGE[precision]
    a = aligned((m if kernel.a_t else k, layout.lda), a_type)
    bb = aligned((k if kernel.b_t else n, layout.ldb), b_type)
    c = aligned((n, layout.ldc), c_type)
    ctx.draw.into(a, precision, "a")
    ctx.draw.into(bb, precision, "b")
    y = a[:, :k].T if kernel.a_t else a[:, :m]
    x = bb[:, :n].T if kernel.b_t else bb[:, :k]
    return Operands(a, bb, c, x, y, c[:, :m])


def require(ctx: MklContext, precision: Precision) -> GemmCall:
    """The precision's routine; unsupported where MKL has none here, or the CPU lacks its instructions."""
    call = CALLS.get(precision)
    if call is None:
        raise Unsupported(
            f"MKL's GEMM runs fp32 (cblas_sgemm), int8 (cblas_gemm_s8u8s32), bf16 and fp16 (cblas_gemm_bf16bf16f32, "
            f"cblas_gemm_f16f16f32) in this backend; {precision.value} is not run"
        )
    if ctx.cpu.lacks(call.isa):
        raise Unsupported(
            f"MKL's {precision.value} GEMM ({call.direct}) is made for the {' or '.join(call.isa)} instructions, "
            f"which this CPU ({ctx.cpu.vendor}, {ctx.cpu.model}) does not have"
        )
    return call


def direct_call(
    mkl: b.Mkl, call: GemmCall, precision: Precision, ops: Operands, sizes: tuple[int, ...], lds: Layout
) -> Callable[[], object]:
    """The routine with its arguments bound: the timed call is the library call alone."""
    layout, ta, tb, m, n, k = sizes
    fn = getattr(mkl.lib, call.direct)
    a, bb, c = ops.a.ctypes.data, ops.b.ctypes.data, ops.c.ctypes.data
    if precision is Precision.INT8:
        co = aligned((1,), np.int32)
        args: tuple[Any, ...] = (layout, ta, tb, b.FIX_OFFSET, m, n, k, 1.0, a, lds.lda, 0, bb, lds.ldb, 0, 0.0)
        return Bound(fn, (*args, c, lds.ldc, co.ctypes.data), [ops.a, ops.b, ops.c, co])
    return Bound(fn, (layout, ta, tb, m, n, k, 1.0, a, lds.lda, bb, lds.ldb, 0.0, c, lds.ldc), [ops.a, ops.b, ops.c])


def packed_call(
    mkl: b.Mkl, call: GemmCall, precision: Precision, ops: Operands, sizes: tuple[int, ...], lds: Layout
) -> Callable[[], object]:
    """A and B packed now (the routine's _pack into buffers of _pack_get_size bytes); the timed call is
    _compute on both packed matrices (CblasPacked), as bench.cpp's sgemm_compute("P", "P", ...)."""
    layout, ta, tb, m, n, k = sizes
    lib = mkl.lib
    packed = []
    for which, trans, src, ld in ((b.A_MATRIX, ta, ops.a, lds.lda), (b.B_MATRIX, tb, ops.b, lds.ldb)):
        dest = aligned((int(getattr(lib, call.pack_size)(which, m, n, k)),), np.uint8)
        alpha = (1.0,) if precision is Precision.FP32 else ()  # only sgemm_pack scales by alpha
        getattr(lib, call.pack)(layout, which, trans, m, n, k, *alpha, src.ctypes.data, ld, dest.ctypes.data)
        packed.append(dest)
    ap, bp, c = packed[0].ctypes.data, packed[1].ctypes.data, ops.c.ctypes.data
    fn = getattr(lib, call.compute)
    if precision is Precision.FP32:
        args: tuple[Any, ...] = (layout, b.PACKED, b.PACKED, m, n, k, ap, lds.lda, bp, lds.ldb, 0.0, c, lds.ldc)
    elif precision is Precision.INT8:
        co = aligned((1,), np.int32)
        packed.append(co)
        args = (layout, b.PACKED, b.PACKED, b.FIX_OFFSET, m, n, k, 1.0, ap, lds.lda, 0, bp, lds.ldb, 0, 0.0, c)
        args += (lds.ldc, co.ctypes.data)
    else:
        args = (layout, b.PACKED, b.PACKED, m, n, k, 1.0, ap, lds.lda, bp, lds.ldb, 0.0, c, lds.ldc)
    return Bound(fn, args, [*packed, ops.c])


def prepare(ctx: MklContext, kernel: GemmKernel, precision: Precision) -> Prepared:
    call = require(ctx, precision)
    m, n, k = kernel.m, kernel.n, kernel.k
    lds = Layout.of(m, n, k, kernel.a_t, kernel.b_t, ctx.deepbench_ld)
    ops = operands(ctx, kernel, precision, lds)
    sizes = (b.COL_MAJOR, b.TRANS if kernel.a_t else b.NO_TRANS, b.TRANS if kernel.b_t else b.NO_TRANS, m, n, k)
    make = packed_call if ctx.options.gemm == "packed" else direct_call
    run = make(ctx.mkl, call, precision, ops, sizes, lds)

    def check() -> Check:
        return check_matmul(ops.out, as_numbers(ops.x, precision), as_numbers(ops.y, precision), precision, ctx.rng)

    part = TimedPart(
        "fwd",
        run,
        check,
        kernel.flops(),
        kernel.min_bytes("fwd", precision),
        info=part_info(ctx, kernel, precision, call, lds),
        capturable=False,
        output=ops.c,
    )
    return Prepared(parts=[part])


def part_info(ctx: MklContext, kernel: GemmKernel, precision: Precision, call: GemmCall, lds: Layout) -> dict[str, Any]:
    blas = MklBlasCall(
        transa="T" if kernel.a_t else "N",
        transb="T" if kernel.b_t else "N",
        m=kernel.m,
        n=kernel.n,
        k=kernel.k,
        lda=lds.lda,
        ldb=lds.ldb,
        ldc=lds.ldc,
        leading_dimensions=lds.rule,
    )
    info = MklPartInfo(call=call.routine(ctx.options.gemm), mode=ctx.options.gemm, mkl=ctx.runtime, blas_call=blas)
    extra: dict[str, Any] = {"types": f"A {call.a}, B {call.b}, C {call.c}", "alpha": 1, "beta": 0}
    extra.update(deepbench_departure=DEPARTURE, memory=MEMORY)
    if precision is Precision.INT8:
        extra.update(offsets=INT8_OFFSETS, operand_ranges=INT8_RANGES)
    elif precision is not Precision.FP32:
        extra["output"] = WIDE_OUTPUT
    return {**info.model_dump(), **extra}
