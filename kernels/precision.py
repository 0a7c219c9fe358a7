"""Precisions named by what they are: the input type, the accumulate type and the output type.

DeepBench's minimums are 16-bit multiply / 32-bit accumulate for training and 8-bit multiply /
32-bit accumulate for inference; every result records all three types so that "fp16" can never
mean two different things in two results.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict


class Precision(str, Enum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
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
        PrecisionInfo(name=Precision.FP32, inputs="float32", accumulate="float32", output="float32",
                      description="IEEE float32 inputs, float32 arithmetic"),
        PrecisionInfo(name=Precision.TF32, inputs="float32", accumulate="float32", output="float32",
                      description="float32 storage, tensor-float-32 multiply (10-bit mantissa), float32 accumulate"),
        PrecisionInfo(name=Precision.FP16, inputs="float16", accumulate="float32", output="float16",
                      description="float16 inputs and outputs, float32 accumulate"),
        PrecisionInfo(name=Precision.BF16, inputs="bfloat16", accumulate="float32", output="bfloat16",
                      description="bfloat16 inputs and outputs, float32 accumulate"),
        PrecisionInfo(name=Precision.INT8, inputs="int8", accumulate="int32", output="int32",
                      description="int8 inputs, int32 accumulate and output"),
        PrecisionInfo(name=Precision.FP8, inputs="float8_e4m3fn", accumulate="float32", output="bfloat16",
                      description="float8 e4m3 inputs with per-tensor scales, float32 accumulate, bfloat16 output"),
    )
}

# Bytes per element of the inputs and outputs, for the fewest-bytes (roofline) counts.
INPUT_BYTES = {Precision.FP32: 4, Precision.TF32: 4, Precision.FP16: 2, Precision.BF16: 2,
               Precision.INT8: 1, Precision.FP8: 1}
OUTPUT_BYTES = {Precision.FP32: 4, Precision.TF32: 4, Precision.FP16: 2, Precision.BF16: 2,
                Precision.INT8: 4, Precision.FP8: 2}

# Relative Frobenius-norm error allowed against a float64 reference, per input precision. Set
# from the unit round-off of the inputs times a margin for accumulation over long dot products
# (fp32 ~ 6e-8, tf32 ~ 5e-4, fp16 ~ 5e-4, bf16 ~ 4e-3); integer GEMM must be exact.
TOLERANCE = {Precision.FP32: 1e-4, Precision.TF32: 5e-3, Precision.FP16: 5e-3, Precision.BF16: 2e-2,
             Precision.INT8: 0.0, Precision.FP8: 1e-1}

# cuDNN's transform-domain convolutions (Winograd, FFT) multiply the inputs by transform matrices
# whose norms amplify rounding (Lavin & Gray 2016; Barabasz et al. 2020): in fp32 they lose about
# one decimal digit against direct arithmetic. A fp32 convolution whose kernels the profiler names
# as Winograd or FFT is held to this tolerance instead, and the check's detail says so; it stays
# below TF32's, so TF32 arithmetic posing as fp32 still fails.
TRANSFORM_TOLERANCE = {Precision.FP32: 2e-3}


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
