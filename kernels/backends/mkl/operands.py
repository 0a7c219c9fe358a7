"""The mkl backend's operands: numpy arrays in 4 KiB-aligned memory (DeepBench's MKL_MEM_ALIGNMENT for
mkl_malloc), laid out column-major with the leading dimensions DeepBench's Intel GEMM benchmark gave MKL,
and drawn as the run asks (--inputs), in MKL's types.

Leading dimensions: DeepBench's code/intel/gemm/bench.cpp padded every one of them past the next multiple
of 128 elements, `FIX_LD(x) = ((x + 127) / 128) * 128 + 16` (lda of the stored A, ldb of the stored B,
ldc = FIX_LD(m)), in fp32 and in int8 alike (its s8u8s32 build shares the code), and left m, n and k as
listed; so does this backend under --pad deepbench (the default) and both. --pad none hands MKL tight
leading dimensions (the stored matrix's rows).

int8: A int8 over its whole range, B uint8 over [0, 127]. Without VNNI (AVX2, AVX-512 before Cascade
Lake, where CI's AMD EPYC may run) MKL's s8u8s32 kernels add two u8 x s8 products in saturating int16
(vpmaddubsw): with B over [0, 255] every output of a 64x64x512 GEMM came out wrong under
MKL_ENABLE_INSTRUCTIONS=AVX2 and AVX512 on a Xeon, none with B over [0, 127] (2 x 127 x 128 < 2^15).
bf16: float32 values rounded to bfloat16 (to nearest, ties to even) and stored as MKL_BF16 bits; the
float64 reference reads the rounded values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...inputs import drawn_for, numpy_floats
from ...precision import Precision
from ...reference import int8_operands

ALIGNMENT = 4096  # bench.cpp's MKL_MEM_ALIGNMENT
LD_BLOCK, LD_EXTRA = 128, 16  # FIX_LD's multiple and the 16 elements past it
UINT8_HIGH = 128  # B's values: [0, 127] (exclusive bound); the module's docstring says why
BF16_SHIFT = 16
DRAW_BLOCK_BYTES = 64 << 20  # operands are drawn this much at a time
STORAGE = {
    Precision.FP32: (np.float32, np.float32, np.float32),
    Precision.INT8: (np.int8, np.uint8, np.int32),
    Precision.BF16: (np.uint16, np.uint16, np.float32),  # MKL_BF16: the upper half of a float32
    Precision.FP16: (np.float16, np.float16, np.float32),
}


def fix_ld(x: int) -> int:
    """DeepBench's FIX_LD: past the next multiple of 128 by 16 elements."""
    return (x + LD_BLOCK - 1) // LD_BLOCK * LD_BLOCK + LD_EXTRA


@dataclass(frozen=True)
class Layout:
    """A column-major GEMM's leading dimensions and the rule they follow."""

    lda: int
    ldb: int
    ldc: int
    rule: str

    @classmethod
    def of(cls, m: int, n: int, k: int, a_t: bool, b_t: bool, deepbench: bool) -> Layout:
        """The stored A is k x m when transposed (else m x k), B n x k (else k x n), C m x n: each
        matrix's leading dimension is its rows, FIX_LD'd as DeepBench's bench.cpp did when `deepbench`."""
        rows = (k if a_t else m, n if b_t else k, m)
        if deepbench:
            lda, ldb, ldc = (fix_ld(r) for r in rows)
            return cls(lda, ldb, ldc, "deepbench: FIX_LD(rows) = ((rows + 127) / 128) * 128 + 16 (bench.cpp)")
        return cls(*rows, "tight: the stored matrix's rows (--pad none)")


def aligned(shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """A zeroed array whose data starts on an ALIGNMENT boundary (the view keeps its buffer alive)."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dt.itemsize
    raw = np.zeros(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + nbytes].view(dt).reshape(shape)


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest with ties to even (finite inputs)."""
    bits = values.astype(np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> BF16_SHIFT) & np.uint32(1))
    return ((bits + rounding) >> BF16_SHIFT).astype(np.uint16)


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << BF16_SHIFT).view(np.float32)


class Draw:
    """Seeded operands of one precision, as --inputs says (kernels/inputs.py)."""

    def __init__(self, rng: np.random.Generator, inputs: str) -> None:
        self.rng, self.inputs = rng, inputs

    def values(self, shape: tuple[int, ...], precision: Precision, operand: str) -> np.ndarray:
        """Operand `operand` ("a" or "b") of `precision` in MKL's storage type."""
        kind = drawn_for(self.inputs, precision)
        store = STORAGE[precision][0 if operand == "a" else 1]
        if kind == "zeros":
            return np.zeros(shape, dtype=store)
        if precision is Precision.INT8:
            if operand == "a":
                return int8_operands.activations(self.rng, shape)
            return self.rng.integers(0, UINT8_HIGH, size=shape, dtype=np.uint8)
        floats = numpy_floats(self.rng, shape, kind, 1.0)
        return to_bf16_bits(floats) if precision is Precision.BF16 else floats.astype(store)

    def into(self, buffer: np.ndarray, precision: Precision, operand: str) -> None:
        """Fill a 2-D buffer a block of rows at a time: a 1024 x 500000 operand (2 GB) needs no copy of itself."""
        rows = max(1, DRAW_BLOCK_BYTES // max(1, buffer[:1].nbytes))
        for start in range(0, buffer.shape[0], rows):
            block = buffer[start : start + rows]
            block[...] = self.values(block.shape, precision, operand)


def as_numbers(stored: np.ndarray, precision: Precision) -> np.ndarray:
    """The values an operand holds, in a numpy type the reference can read (bf16 bits -> float32)."""
    return from_bf16_bits(stored) if precision is Precision.BF16 else stored
