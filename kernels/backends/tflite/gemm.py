"""Dense GEMM on TFLite as one FULLY_CONNECTED operator, fp32 and int8.

DeepBench's column-major C (m x n) = A (m x k) B (k x n) is computed as FULLY_CONNECTED(input
= B^T, n rows of k; weights = A, m units of k inputs, a constant) = C^T (n x m row-major), which
is C in DeepBench's column-major layout. All device-suite GEMMs are N,N; a transposed operand is
the same product with the constant stored the other way, so a_t/b_t change nothing in the model.

int8: what TFLite computes, exactly: int8 x int8 products (weights in [-127, 127], TFLite's
symmetric int8 spec: kernels/reference/int8_operands.py says why) accumulated in int32, then requantized
to an int8 output (FULLY_CONNECTED accepts only uint8/int8/int16 outputs for int8 inputs; an
int32 output is rejected at prepare). Scales: input 1, weights 1 (zero points 0), output a power
of two 2^e, so each output is acc * 2^-e rounded to an integer neighbour and clamped to [-128, 127].
The check recomputes the exact int32 accumulator and demands one of the two neighbours
(numpy_checks.check_requantized derives why exactly those): an output a step or more beyond them
fails."""

from __future__ import annotations

import numpy as np

from ...catalog import GemmKernel
from ...precision import Precision
from ...reference.numpy_checks import accumulator_rows, check_matmul, check_requantized
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import INT8_MAX, INT8_MIN, TfliteContext, output_scale
from .flatbuffer import NO_TENSOR, CsrSparsity, ModelSpec, OpSpec, Quant, TensorSpec, schema

CHECK_ROWS = 256  # int8: rows of the output checked in full, chosen at random (all when fewer)
INT8_FC_VERSION = 4


def fc_model(
    x_shape: tuple[int, int],
    w: np.ndarray,
    precision: Precision,
    out_scale: float = 1.0,
    sparsity: CsrSparsity | None = None,
    w_data: np.ndarray | None = None,
) -> ModelSpec:
    n, m = x_shape[0], w.shape[0]
    if precision is Precision.INT8:
        unit = Quant([1.0], [0])
        tensors = [
            TensorSpec("x", x_shape, np.int8, quant=unit),
            TensorSpec("w", w.shape, np.int8, data=w, quant=unit),
            TensorSpec("y", (n, m), np.int8, quant=Quant([out_scale], [0])),
        ]
        version = INT8_FC_VERSION
    else:
        tensors = [
            TensorSpec("x", x_shape, np.float32),
            TensorSpec("w", w.shape, np.float32, data=w if w_data is None else w_data, sparsity=sparsity),
            TensorSpec("y", (n, m), np.float32),
        ]
        version = 1
    op = OpSpec(
        schema.BuiltinOperator.FULLY_CONNECTED, [0, 1, NO_TENSOR], [2], schema.FullyConnectedOptionsT(), version=version
    )
    return ModelSpec(tensors=tensors, op=op, inputs=[0], outputs=[2])


def prepare(ctx: TfliteContext, kernel: GemmKernel, precision: Precision) -> Prepared:
    if precision not in (Precision.FP32, Precision.INT8):
        raise Unsupported(f"TFLite FULLY_CONNECTED runs fp32 and int8 here; {precision.value} is not run")
    m, n, k = kernel.m, kernel.n, kernel.k
    x = ctx.random((n, k), precision)
    w = ctx.weights((m, k), precision, scale=k**-0.5)
    scale = output_scale(k)
    model = ctx.interpreter(fc_model((n, k), w, precision, out_scale=scale))
    model.set_inputs(x)
    info = model.info("FULLY_CONNECTED")

    def check() -> Check:
        out = model.output()
        if precision is Precision.INT8:
            rows = np.arange(n) if n <= CHECK_ROWS else np.sort(ctx.rng.choice(n, CHECK_ROWS, replace=False))
            acc = accumulator_rows(x, w, rows)
            return check_requantized(out[rows], acc, 1.0 / scale, 0, INT8_MIN, INT8_MAX)
        return check_matmul(out, x, w.T, precision, ctx.rng)

    if precision is Precision.INT8:
        info.update(output="int8, requantized from the int32 accumulator", output_scale=scale, accumulate="int32")
    part = TimedPart(
        "fwd", model.invoke, check, kernel.flops(), kernel.min_bytes("fwd", precision), info=info, capturable=False
    )
    return Prepared(parts=[part])
