"""int8 operands of the inference runtimes' integer kernels (LiteRT, onnxruntime): activations over
the full int8 range, weights over the symmetric range [-127, 127].

The symmetric range is the runtimes' own convention (TFLite's int8 quantization spec: weights
never use -128; onnxruntime's quantizer makes symmetric int8 weights), and their ARM kernels rely
on it: without the dot-product instructions (a Raspberry Pi 4's Cortex-A72) XNNPACK, ruy and
MLAS add two int8 x int8 products in int16, and (-128)(-128) + (-128)(-128) = 32768 wraps.
Measured under emulation of a Cortex-A72: every output with such a pair was 65536 accumulator
units wrong per pair, on LiteRT with and without XNNPACK and on onnxruntime's MatMulInteger;
none with weights in [-127, 127] (the one wrong element of the 5124x700x2048 int8 GEMM, and the
three of the 3072x1500x1024 one, had that cause).

In the reference layer because both runtimes' backends draw them and their checks rely on the range."""

from __future__ import annotations

import numpy as np

ACTIVATION_RANGE = (-128, 128)  # numpy's high is exclusive
WEIGHT_RANGE = (-127, 128)


def activations(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(*ACTIVATION_RANGE, size=shape, dtype=np.int8)


def weights(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(*WEIGHT_RANGE, size=shape, dtype=np.int8)
