"""Precisions named by what they are: the input type, the accumulate type and the output type.

DeepBench's minimums are 16-bit multiply / 32-bit accumulate for training and 8-bit multiply /
32-bit accumulate for inference; every result records all three types so that "fp16" can never
mean two different things in two results. DeepBench's own half GEMM call (`gemm_bench.cu`:
`cublasGemmEx` with CUDA_R_16F compute) accumulated in fp16: that arithmetic is a precision of its
own, `fp16acc16`, asked for by name and made only by the backends that declare it.
"""

from __future__ import annotations

import math
from enum import Enum

from pydantic import BaseModel, ConfigDict


class Precision(str, Enum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    FP16ACC16 = "fp16acc16"
    BF16 = "bf16"
    INT8 = "int8"
    FP8 = "fp8"


class PrecisionInfo(BaseModel):
    """What a precision name means, recorded in every result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Precision
    inputs: str
    accumulate: str
    output: str
    description: str


PRECISIONS: dict[Precision, PrecisionInfo] = {
    p.name: p
    for p in (
        PrecisionInfo(
            name=Precision.FP32,
            inputs="float32",
            accumulate="float32",
            output="float32",
            description="IEEE float32 inputs, float32 arithmetic",
        ),
        PrecisionInfo(
            name=Precision.TF32,
            inputs="float32",
            accumulate="float32",
            output="float32",
            description="float32 storage, tensor-float-32 multiply (10-bit mantissa), float32 accumulate",
        ),
        PrecisionInfo(
            name=Precision.FP16,
            inputs="float16",
            accumulate="float32",
            output="float16",
            description="float16 inputs and outputs, float32 accumulate",
        ),
        PrecisionInfo(
            name=Precision.FP16ACC16,
            inputs="float16",
            accumulate="float16",
            output="float16",
            description="float16 inputs, outputs and accumulate: DeepBench gemm_bench.cu's half call "
            "(cublasGemmEx, CUDA_R_16F compute)",
        ),
        PrecisionInfo(
            name=Precision.BF16,
            inputs="bfloat16",
            accumulate="float32",
            output="bfloat16",
            description="bfloat16 inputs and outputs, float32 accumulate",
        ),
        PrecisionInfo(
            name=Precision.INT8,
            inputs="int8",
            accumulate="int32",
            output="int32",
            description="int8 inputs, int32 accumulate and output",
        ),
        PrecisionInfo(
            name=Precision.FP8,
            inputs="float8_e4m3fn",
            accumulate="float32",
            output="bfloat16",
            description="float8 e4m3 inputs with per-tensor scales, float32 accumulate, bfloat16 output",
        ),
    )
}

# Bytes per element of the inputs and outputs, for the fewest-bytes (roofline) counts.
INPUT_BYTES = {
    Precision.FP32: 4,
    Precision.TF32: 4,
    Precision.FP16: 2,
    Precision.FP16ACC16: 2,
    Precision.BF16: 2,
    Precision.INT8: 1,
    Precision.FP8: 1,
}
OUTPUT_BYTES = {
    Precision.FP32: 4,
    Precision.TF32: 4,
    Precision.FP16: 2,
    Precision.FP16ACC16: 2,
    Precision.BF16: 2,
    Precision.INT8: 4,
    Precision.FP8: 2,
}

# Relative Frobenius-norm error allowed against a float64 reference, per input precision, at the
# least (the floor of tolerance() below). Set from the unit round-off of the inputs times a margin
# for accumulation over long dot products (fp32 ~ 6e-8, tf32 ~ 5e-4, fp16 ~ 5e-4, bf16 ~ 4e-3);
# integer GEMM must be exact. Over the published H100/H200 runs (GEMM, convolution, layers) the
# largest error is 1/6 of these (fp16 conv bwd_filter 8.8e-4, fp32 5.5e-5: docs/tolerances.md).
TOLERANCE = {
    Precision.FP32: 1e-4,
    Precision.TF32: 5e-3,
    Precision.FP16: 5e-3,
    Precision.FP16ACC16: 5e-3,
    Precision.BF16: 2e-2,
    Precision.INT8: 0.0,
    Precision.FP8: 1e-1,
}

# What a result loses to rounding, and how that grows with the work (tolerance()): the unit
# round-off of the type the results are rounded to (for tf32: the multiply's 10-bit inputs, the
# reference taking the float32 ones; for fp8: the bfloat16 output, the reference taking the
# quantized inputs) ...
UNIT_ROUNDOFF = {
    Precision.FP32: 2.0**-24,
    Precision.TF32: 2.0**-11,
    Precision.FP16: 2.0**-11,
    Precision.FP16ACC16: 2.0**-11,
    Precision.BF16: 2.0**-8,
    Precision.INT8: 0.0,
    Precision.FP8: 2.0**-8,
}
# ... and that of the accumulator it sums in, by the accumulate type PRECISIONS records: float32
# for every floating precision but fp16acc16, whose float16 accumulator loses 2^-11 per addition
# (integers accumulate exactly).
ACCUMULATOR_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "int32": 0.0}
# The tolerance over the expected error: the largest error seen in any correct computation is at
# most 1.4 expected errors (the GPU's fp16 vanilla RNN backward that failed a fixed tolerance:
# 5.39e-3 against 3.9e-3 expected; CPU sweeps over cells, sizes, steps and seeds at most 0.7),
# so a correct kernel keeps a margin of 2.9x or more (docs/tolerances.md).
TOLERANCE_MARGIN = 4.0


def tolerance(precision: Precision, reduction: int = 1, steps: int = 0) -> float:
    """The error a correct computation stays within: MARGIN x the expected relative error, never
    below the precision's floor (TOLERANCE), exact (0) for integers.

    Expected error = u_out (1 + sqrt(steps)) + u_acc sqrt(reduction): a result rounded once to its
    type loses about u_out; one accumulated over `steps` roundings in that type (an RNN's weight
    gradient summed over its time steps, as cuDNN and autograd sum it) gains a random walk of
    sqrt(steps) more; a dot product of length `reduction` adds sqrt(reduction) round-offs of the
    precision's accumulator (errors of random sign add in quadrature, not linearly): 2^-24 for a
    float32 one, 2^-11 for fp16acc16's float16 one (ACCUMULATOR_ROUNDOFF)."""
    floor = TOLERANCE[precision]
    if floor == 0.0:
        return 0.0
    accumulator = ACCUMULATOR_ROUNDOFF[PRECISIONS[precision].accumulate]
    expected = UNIT_ROUNDOFF[precision] * (1.0 + math.sqrt(max(steps, 0))) + accumulator * math.sqrt(max(reduction, 1))
    return max(floor, TOLERANCE_MARGIN * expected)


def recurrence_tolerance(precision: Precision, hidden: int, batch: int, timesteps: int, direction: str) -> float:
    """An RNN check's tolerance. Forward, each state is one step's GEMM (a reduction over the hidden
    size) rounded once, and earlier states' rounding decays through the gates. Backward, the
    recurrent weight gradient sums one outer product per time step (a reduction over batch x
    steps), accumulated in the layer's type step by step: its error grows with the square root of
    the steps (measured on CPU and GPU: docs/tolerances.md)."""
    if direction == "fwd":
        return tolerance(precision, reduction=hidden, steps=1)
    return tolerance(precision, reduction=batch * timesteps, steps=timesteps)


# cuDNN's transform-domain convolutions (Winograd, FFT) multiply the inputs by transform matrices
# whose norms amplify rounding (Lavin & Gray 2016; Barabasz et al. 2020): in fp32 they lose about
# one decimal digit against direct arithmetic. A fp32 convolution whose kernels the profiler names
# as Winograd or FFT is held to this tolerance instead, and the check's detail says so; it stays
# below TF32's, so TF32 arithmetic posing as fp32 still fails.
TRANSFORM_TOLERANCE = {Precision.FP32: 2e-3}


# Precisions that name one library call's arithmetic rather than a storage type: only a backend
# that declares one (backends/contract/declaration.py `precisions`) makes it; every other backend reports it
# unsupported (backends/contract/base.py `refuse_undeclared`) instead of running its own, different arithmetic.
DECLARED_ONLY = frozenset({Precision.FP16ACC16})


def parse_precisions(text: str) -> list[Precision]:
    """'fp32,fp16' -> [Precision.FP32, Precision.FP16]; raises ValueError naming the choices."""
    out = []
    for part in (p.strip().lower() for p in text.split(",") if p.strip()):
        try:
            out.append(Precision(part))
        except ValueError:
            choices = ", ".join(p.value for p in Precision)
            raise ValueError(f"unknown precision '{part}' (choose from: {choices})") from None
    return out
