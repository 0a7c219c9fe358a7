"""The collectives' inputs: seeded random integers whose sums are exact in float32.

Every rank computes the inputs of every rank it needs for its exact expected result (a 1 GiB
all-reduce on n ranks: n draws of 268 million values), so the draw is split into fixed chunks, each
from its own generator seeded by (seed, rank, size, share, chunk), drawn on the host's cores at once:
the values depend on the seeds only, never on how many threads drew them. numpy's generators release
the GIL while they fill an array, which is what makes threads worth it here."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .declaration import MAX_EXACT_RANKS, VALUE_MAX  # noqa: F401 - MAX_EXACT_RANKS: the bound these values keep

CHUNK = 1 << 22  # values per generator: large enough to amortise a generator, small enough to share out


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def rank_values(floats: int, rank: int, seed: int, part: int = -1) -> np.ndarray:
    """Random integers 1..VALUE_MAX as float32, different on every rank, seed and share (`part`, for
    the collectives that split a rank's input into shares; -1: the whole input)."""
    key = [seed, rank, floats] + ([part] if part >= 0 else [])
    out = np.empty(floats, dtype=np.float32)

    def fill(start: int) -> None:
        rng = np.random.default_rng([*key, start // CHUNK])
        stop = min(floats, start + CHUNK)
        out[start:stop] = rng.integers(1, VALUE_MAX + 1, size=stop - start, dtype=np.int8)

    starts = range(0, floats, CHUNK)
    if len(starts) <= 1:
        for start in starts:
            fill(start)
        return out
    with ThreadPoolExecutor(max_workers=min(_threads(), len(starts))) as pool:
        list(pool.map(fill, starts))
    return out
