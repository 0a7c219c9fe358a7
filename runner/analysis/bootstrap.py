"""Bootstrap medians of many sample sets at once, drawn from their exact distribution.

A comparison needs, per kernel and direction, the distribution of the median of a resample
(n draws with replacement from the n raw samples). Resampling literally costs draws x n per
set: for two 600-kernel runs with up to 1,000 samples a direction, over a billion values to
gather and partition (21-70 s on a 2-core machine). The same distribution is drawn exactly in
O(draws) per set from order statistics instead:

- a resample's k-th smallest draw is the sorted samples' element floor(n * U_(k)), where U_(k)
  is the k-th smallest of n uniforms (the index floor(n * U) of one draw is monotone in U), and
  U_(k) ~ Beta(k, n - k + 1);
- odd n: the median is the ((n + 1) / 2)-th draw;
- even n: numpy's median averages the (n/2)-th and (n/2 + 1)-th draws; given U_(k) = u, the
  next uniform is u + (1 - u) * Beta(1, n - k) (the smallest of the n - k uniforms above u).

numpy's Beta generator takes arrays of parameters, so every set and every draw is one array
operation (no loop over kernels). By hand because neither numpy nor a library in the
environment (scipy is not installed) draws bootstrap medians this way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_medians(sets: Sequence[Sequence[float]], draws: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of `draws` bootstrap resamples of each sample set: shape (len(sets), draws).
    Every set must hold at least one sample."""
    if not sets:
        return np.zeros((0, draws))
    sizes = np.array([len(s) for s in sets])
    if (sizes < 1).any():
        raise ValueError("a sample set is empty")
    flat = np.concatenate([np.sort(np.asarray(s, dtype=float)) for s in sets])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))[:, None]
    n = sizes[:, None].astype(float)
    k = np.floor((sizes + 1) / 2)[:, None]  # the lower middle draw's rank (the middle one for odd n)
    shape = (len(sets), draws)
    u_low = rng.beta(np.broadcast_to(k, shape), np.broadcast_to(n - k + 1, shape))
    # even n: the next order statistic; odd n: the same one (Beta(1, 0) is not drawn: a = b there)
    even = (sizes % 2 == 0)[:, None]
    above = np.broadcast_to(np.maximum(n - k, 1), shape)
    u_high = np.where(even, u_low + (1 - u_low) * rng.beta(np.ones(shape), above), u_low)
    last = sizes[:, None] - 1
    low = np.minimum(np.floor(n * u_low).astype(int), last)
    high = np.minimum(np.floor(n * u_high).astype(int), last)
    return (flat[starts + low] + flat[starts + high]) / 2
