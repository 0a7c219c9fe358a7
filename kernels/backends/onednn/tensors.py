"""A tensor as a user sees it (row-major: NCHW, OIHW, TNC ...) and as a primitive stores it (the layout
it chose for `any`), with oneDNN's reorders between the two outside every timed call; and the
numpy side of oneDNN's 16-bit types.

numpy has no bfloat16: a bf16 tensor is held as its 16 bits (uint16), made from float32 by
rounding to nearest even and read back exactly (a bf16 is the upper half of a float32)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import constants as C
from .objects import Engine, Memory, MemoryDesc, md_format, reorder

BF16_SHIFT = 16
BF16_ROUNDING_BIAS = 0x7FFF


def to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest even (finite inputs)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + BF16_ROUNDING_BIAS + ((bits >> BF16_SHIFT) & 1)
    return (rounded >> BF16_SHIFT).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits -> the float32 of the same value."""
    return (bits.astype(np.uint32) << BF16_SHIFT).view(np.float32)


def stored(values: np.ndarray, data_type: int) -> np.ndarray:
    """float32 (or integer) values as a buffer of `data_type` holds them."""
    if data_type == C.BF16:
        return to_bf16(values)
    return values.astype(NUMPY_OF[data_type], copy=False)


def as_float(buffer: np.ndarray, data_type: int) -> np.ndarray:
    """A buffer's values as numbers numpy computes with (bf16 bits -> float32)."""
    return from_bf16(buffer) if data_type == C.BF16 else buffer


NUMPY_OF = {C.F32: np.float32, C.F16: np.float16, C.S32: np.int32, C.S8: np.int8, C.U8: np.uint8}


class Placed:
    """One tensor: its user memory (row-major `shape`, numpy's `user` view) and the primitive's
    memory in the layout `md` says (the same buffer where the two layouts agree)."""

    def __init__(self, engine: Engine, shape: tuple[int, ...], data_type: int, md: Any) -> None:
        lib = engine.lib
        self.engine, self.shape, self.data_type = engine, shape, data_type
        self.user_md = MemoryDesc(lib, shape, data_type, PLAIN_TAGS[len(shape)])
        self.md = md
        self.user_memory = Memory(engine, self.user_md.handle, data_type)
        self.user = self.user_memory.array(shape)
        self.same = bool(lib.dnnl_memory_desc_equal(self.user_md.handle, md))
        self.memory = self.user_memory if self.same else Memory(engine, md, data_type)
        self.format = md_format(lib, md)

    def fill(self, values: np.ndarray) -> None:
        """Set the tensor (float32 or integer values, converted to its type) in the primitive's layout."""
        self.user[...] = stored(values, self.data_type)
        self.to_primitive()

    def to_primitive(self) -> None:
        if not self.same:
            reorder(self.engine, self.user_memory, self.user_md.handle, self.memory, self.md)

    def read(self) -> np.ndarray:
        """The tensor's values as the primitive left them, in the user's layout (float32 for 16-bit floats)."""
        if not self.same:
            reorder(self.engine, self.memory, self.md, self.user_memory, self.user_md.handle)
        return as_float(self.user, self.data_type)

    def spoil(self, value: float) -> None:
        """Overwrite the primitive's copy (a test's or the harness's poisoned output)."""
        self.user[...] = stored(np.full(self.shape, value, dtype=np.float32), self.data_type)
        self.to_primitive()


# The row-major tag of each rank (dnnl_format_tag_t: a, ab, abc, abcd, abcde)
PLAIN_TAGS = {1: C.TAG_A, 2: C.TAG_AB, 3: C.TAG_ABC, 4: C.TAG_ABCD, 5: C.TAG_ABCDE}
