"""The collectives' inputs: seeded random integers whose sums are exact in float32."""

from __future__ import annotations

import numpy as np

# Values on each rank are integers in [1, VALUE_MAX]: sums of up to 2**24 / VALUE_MAX ranks are
# exact in float32, and they are never zeros or constants.
VALUE_MAX = 8
MAX_EXACT_RANKS = 2**24 // VALUE_MAX


def rank_values(floats: int, rank: int, seed: int, part: int = -1) -> np.ndarray:
    """Random integers 1..VALUE_MAX as float32, different on every rank, seed and share (`part`, for
    the collectives that split a rank's input into shares; -1: the whole input)."""
    rng = np.random.default_rng([seed, rank, floats] + ([part] if part >= 0 else []))
    return rng.integers(1, VALUE_MAX + 1, size=floats, dtype=np.int8).astype(np.float32)
