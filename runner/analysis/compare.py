"""Kernel-by-kernel comparison of sources (runs or references) against the first, with noise.

Matching: by kernel id and precision when all sources are runs of our catalog; by DeepBench's
parameters and precision when a reference takes part (a published row belongs to a set, a run's
kernel may come from another set or the smoke suite). `any_precision` pairs a kernel across
precisions (the other source's row in the baseline's precision where it has one).

Which time: the sum of the medians of the directions BOTH sides timed (DeepBench's first-layer
convolutions have no backward-data; inference workbooks publish forward only), so a ratio never
compares different work; the directions used are shown.

The verdict (documented in the README) respects the noise of both sides:
- Each side's time is resampled: a run's raw samples of every compared direction are
  bootstrapped (the median of a resample, summed over directions); a published figure is
  known only to its rounding (DeepBench printed 1 us steps), so it is drawn uniformly within
  half a microsecond. The ratio other/baseline of independent draws gives a 95% interval.
- same:    the whole interval lies within [1/(1+t), 1+t]  (t = threshold, default 5%)
- slower:  the interval lies above 1 and the ratio of medians exceeds 1+t
- faster:  the interval lies below 1 and the ratio of medians is under 1/(1+t)
- unclear: anything else (noise too large for the difference, or a difference below t that
  the noise cannot confirm as negligible), and any side with fewer than MIN_SAMPLES samples.
Per operation, the geometric mean of the ratios over kernels that both sides ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from deepbench.kernels.catalog import KERNEL_CLASSES

from .sources import PUBLISHED_RESOLUTION_US, Entry, Source

DEFAULT_THRESHOLD = 0.05
BOOTSTRAP_DRAWS = 2000
CONFIDENCE = 0.95
MIN_SAMPLES = 3
SEED = 20170926  # DeepBench's first release date: any fixed seed makes reports repeatable
VERDICTS = ("faster", "slower", "same", "unclear")


@dataclass(frozen=True)
class Ratio:
    """other time / baseline time over `directions`, with its interval and verdict."""

    base_us: float
    other_us: float
    ratio: float
    low: float
    high: float
    verdict: str
    directions: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class Row:
    base: Entry | None
    others: tuple[Entry | None, ...]
    ratios: tuple[Ratio | None, ...]

    @property
    def any(self) -> Entry:
        return self.base or next(e for e in self.others if e is not None)


@dataclass
class Comparison:
    sources: list[Source]
    by: str
    threshold: float
    any_precision: bool = False
    rows: list[Row] = field(default_factory=list)
    # per other source: kernels only the baseline has / only that source has
    only_base: list[list[Entry]] = field(default_factory=list)
    only_other: list[list[Entry]] = field(default_factory=list)

    @property
    def base(self) -> Source:
        return self.sources[0]

    @property
    def others(self) -> list[Source]:
        return self.sources[1:]

    def summary(self) -> list[dict]:
        """Per other source and operation: kernels compared, geometric-mean ratio, verdict counts."""
        out = []
        for i, other in enumerate(self.others):
            for op in (*KERNEL_CLASSES, "all"):
                rs = [ratio for r in self.rows
                      if (ratio := r.ratios[i]) is not None and (op == "all" or r.any.kernel.op == op)]
                if not rs:
                    continue
                counts = {v: sum(1 for r in rs if r.verdict == v) for v in VERDICTS}
                gm = geomean([r.ratio for r in rs])
                out.append({"source": other.label, "versus": versus(other, self.base), "op": op, "kernels": len(rs),
                            "geomean": gm, "answer": speed(gm), **counts})
        return out


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def speed(ratio: float) -> str:
    """A time ratio (other / baseline) as the other side's speed: '6.30x faster', '1.20x slower'."""
    if not ratio > 0 or math.isinf(ratio):
        return ""
    return f"{1 / ratio:,.2f}x faster" if ratio < 1 else f"{ratio:,.2f}x slower" if ratio > 1 else "as fast"


def phrase(r: Ratio) -> str:
    """The verdict in words, naming what moved: '6.30x faster', 'same (1.01x slower)',
    'unclear (1.08x slower?)'."""
    if r.verdict in ("faster", "slower"):
        return speed(r.ratio)
    if r.verdict == "same":
        return f"same ({speed(r.ratio)})"
    return f"unclear ({speed(r.ratio)}?)"


def versus(other: Source, base: Source) -> str:
    """'H100 vs DeepBench V100': every comparison names both sides, the baseline second."""
    return f"{other.label} vs {base.label}"


def _draws(entry: Entry, directions: tuple[str, ...], rng: np.random.Generator, source_kind: str
           ) -> tuple[np.ndarray | None, str]:
    """Resampled totals over `directions` (None when the noise is unknown, with the reason)."""
    if source_kind == "reference" or not entry.part_samples:
        total = sum(entry.parts_us[d] for d in directions)
        half = PUBLISHED_RESOLUTION_US / 2
        return rng.uniform(total - half, total + half, BOOTSTRAP_DRAWS), ""
    acc = np.zeros(BOOTSTRAP_DRAWS)
    for d in directions:
        xs = np.asarray(entry.part_samples.get(d, ()), dtype=float)
        if len(xs) < MIN_SAMPLES:
            return None, f"fewer than {MIN_SAMPLES} samples"
        idx = rng.integers(0, len(xs), size=(BOOTSTRAP_DRAWS, len(xs)))
        acc += np.median(xs[idx], axis=1)
    return acc, ""


def verdict(ratio: float, low: float, high: float, threshold: float) -> str:
    up = 1 + threshold
    if low >= 1 / up and high <= up:
        return "same"
    if low > 1 and ratio > up:
        return "slower"
    if high < 1 and ratio < 1 / up:
        return "faster"
    return "unclear"


def ratio_of(base: Entry, other: Entry, base_kind: str, other_kind: str, threshold: float,
             rng: np.random.Generator) -> Ratio | None:
    if not (base.ok and other.ok):
        return None
    common = tuple(d for d in base.parts_us if d in other.parts_us)
    base_dirs = other_dirs = common
    note = ""
    if not common and len(base.parts_us) == len(other.parts_us) == 1:
        # one timed part each under different names (an all-reduce's in_place vs a published time)
        base_dirs, other_dirs = tuple(base.parts_us), tuple(other.parts_us)
        note = f"compared {other_dirs[0]} with {base_dirs[0]}"
    if not base_dirs:
        return None
    b = sum(base.parts_us[d] for d in base_dirs)
    o = sum(other.parts_us[d] for d in other_dirs)
    if b <= 0 or o <= 0:
        return None
    ratio = o / b
    bd, bnote = _draws(base, base_dirs, rng, base_kind)
    od, onote = _draws(other, other_dirs, rng, other_kind)
    if bd is None or od is None:
        return Ratio(b, o, ratio, math.nan, math.nan, "unclear", common, bnote or onote)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(od / bd, [tail, 100 - tail])
    if common and (set(common) != set(base.parts_us) or set(common) != set(other.parts_us)):
        note = "compared on " + "+".join(common)
    return Ratio(b, o, ratio, float(low), float(high), verdict(ratio, float(low), float(high), threshold), common, note)


def match_mode(sources: list[Source]) -> str:
    return "params" if any(s.kind == "reference" for s in sources) else "id"


def _key(e: Entry, by: str, any_precision: bool) -> tuple:
    k = e.key(by)
    return k[:-1] if any_precision else k


def compare(sources: list[Source], threshold: float = DEFAULT_THRESHOLD, by: str | None = None,
            any_precision: bool = False) -> Comparison:
    by = by or match_mode(sources)
    rng = np.random.default_rng(SEED)
    cmp = Comparison(sources=sources, by=by, threshold=threshold, any_precision=any_precision)
    base = sources[0]
    indexes: list[dict[tuple, list[Entry]]] = []
    for other in sources[1:]:
        idx: dict[tuple, list[Entry]] = {}
        for e in other.entries:
            idx.setdefault(_key(e, by, any_precision), []).append(e)
        indexes.append(idx)
    base_keys = set()
    for e in base.entries:
        key = _key(e, by, any_precision)
        base_keys.add(key)
        others: list[Entry | None] = []
        for idx in indexes:
            cands = idx.get(key, [])
            same = [c for c in cands if c.precision == e.precision]
            others.append(next(iter(same or cands), None))
        ratios = tuple(ratio_of(e, o, base.kind, src.kind, threshold, rng) if o is not None else None
                       for o, src in zip(others, sources[1:], strict=False))
        cmp.rows.append(Row(e, tuple(others), ratios))
    for i, idx in enumerate(indexes):
        cmp.only_base.append([r.base for r in cmp.rows if r.others[i] is None and r.base is not None])
        cmp.only_other.append([e for key, es in idx.items() if key not in base_keys for e in es])
    return cmp
