"""What the operands are drawn from (--inputs; Settings.inputs), and what that does to the check.

The data moves the time: zeros draw less power than random values, so a GPU holds a higher clock
(an H100's large fp16 GEMMs ~14% faster on zeros). DeepBench's binaries drew zeros for half and
int8 without meaning to: its `rand<uint16_t>` and `rand<int8_t>` (tensor.h) copy uniform floats
in [0, 1) into integer storage, which truncates every one to 0; its float operands were uniform
in [0, 1). `deepbench` reproduces that, by the storage type: zeros for types narrower than 32 bits
(fp16, fp16acc16, bf16, int8, fp8), uniform [0, 1) for float32 (fp32 and tf32).

A check on zero inputs is trivial: the reference is zero, so it only shows that the outputs are
zero. Where the part names its output buffer, the harness poisons it (NaN, or 1 for integers)
before one more call, so a call that wrote nothing still fails; the check's detail says so."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .precision import Precision
from .results import Check
from .results import DrawnInputs as Drawn

WIDE = frozenset({Precision.FP32, Precision.TF32})  # stored as float32: DeepBench's floats were uniform [0, 1)
TRIVIAL = "zero inputs: the check only shows that the outputs are zero"


def drawn(setting: str, narrow: bool) -> Drawn:
    """The distribution an operand is drawn from under `setting`; `narrow`: stored in fewer than 32 bits."""
    if setting == "deepbench":
        return "zeros" if narrow else "uniform"
    if setting in ("normal", "uniform", "zeros"):
        return setting  # type: ignore[return-value]
    raise ValueError(f"unknown input distribution {setting!r}")


def drawn_for(setting: str, precision: Precision) -> Drawn:
    """What a kernel's operands in `precision` are drawn from (its result records it)."""
    return drawn(setting, precision not in WIDE)


def numpy_floats(rng: np.random.Generator, shape: tuple[int, ...], kind: Drawn, scale: float) -> np.ndarray:
    """float32 operands for the CPU runtimes (onnxruntime, LiteRT)."""
    if kind == "zeros":
        return np.zeros(shape, dtype=np.float32)
    values = rng.random(shape, dtype=np.float32) if kind == "uniform" else rng.standard_normal(shape, dtype=np.float32)
    return values * np.float32(scale)


def poison(output: Any) -> bool:
    """Fill a part's output buffer (a torch tensor or numpy array) with values no zero-input call
    leaves: NaN for floats, 1 for integers. False where there is no buffer to fill."""
    if output is None:
        return False
    floating = (
        output.is_floating_point() if hasattr(output, "is_floating_point") else np.issubdtype(output.dtype, np.floating)
    )
    value = math.nan if floating else 1
    if hasattr(output, "fill_"):
        output.fill_(value)
    else:
        output.fill(value)
    return True


def zero_input_check(check: Check, poisoned: bool) -> Check:
    """The check's detail names it trivial, and whether the outputs were poisoned before the call."""
    how = (
        "the output was poisoned before the checked call, so the call wrote every element"
        if poisoned
        else "the output was not poisoned (the part names no buffer)"
    )
    detail = f"{TRIVIAL}; {how}" + (f"; {check.detail}" if check.detail else "")
    return check.model_copy(update={"detail": detail})


def draw(
    rng: np.random.Generator, shape: tuple[int, ...], precision: Precision, setting: str, scale: float, integers: Any
) -> np.ndarray:
    """A CPU runtime's operand (onnxruntime, LiteRT): int8 from `integers` (reference/int8_operands.py: their
    ranges), float32 as `setting` says; zeros for either where it says zeros."""
    kind = drawn_for(setting, precision)
    if precision is Precision.INT8:
        return np.zeros(shape, dtype=np.int8) if kind == "zeros" else integers(rng, shape)
    return numpy_floats(rng, shape, kind, scale)
