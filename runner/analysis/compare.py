"""Kernel-by-kernel comparison of sources (runs or references) against the first, with noise.

Matching: by kernel id and precision when all sources are runs of our catalog; by DeepBench's
parameters and precision when a reference takes part (a published row belongs to a set, a run's
kernel may come from another set or the smoke suite). `any_precision` pairs a kernel across
precisions (the other source's row in the baseline's precision where it has one).

Which time: the sum of the medians of the directions EVERY source that ran the kernel timed
(DeepBench's first-layer convolutions have no backward-data; inference workbooks publish forward
only), so a ratio never compares different work; a row names the directions when it leaves one
out ("on fwd+bwd_filter"), and its times are those sums. `fastest` ranks on the same core.

The verdict (documented in the README) respects the noise of both sides:
- Each side's time is resampled: a run's raw samples of every compared direction are
  bootstrapped (the median of a resample, summed over directions, drawn for every kernel at
  once: runner/analysis/bootstrap.py); a published figure is
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

from .bootstrap import bootstrap_medians
from .sanity import one_rank
from .sources import PUBLISHED_RESOLUTION_US, Entry, Source
from .unlike import Difference, differences

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
    # what differs between the runs compared (unlike.py), named in every heading
    differences: list[Difference] = field(default_factory=list)

    @property
    def base(self) -> Source:
        return self.sources[0]

    @property
    def others(self) -> list[Source]:
        return self.sources[1:]

    def summary(self) -> list[dict]:
        """Per other source and operation: kernels compared, geometric-mean ratio, verdict counts. A
        collective on one rank moves no data (its time is the library's local cost): in no geomean."""
        out = []
        for i, other in enumerate(self.others):
            for op in (*KERNEL_CLASSES, "all"):
                rs = [
                    ratio
                    for r in self.rows
                    if (ratio := r.ratios[i]) is not None
                    and (op == "all" or r.any.kernel.op == op)
                    and not one_rank(r.any)
                ]
                if not rs:
                    continue
                counts = {v: sum(1 for r in rs if r.verdict == v) for v in VERDICTS}
                gm = geomean([r.ratio for r in rs])
                out.append(
                    {
                        "source": other.label,
                        "versus": versus(other, self.base),
                        "op": op,
                        "kernels": len(rs),
                        "geomean": gm,
                        "answer": speed(gm),
                        **counts,
                    }
                )
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


def verdict(ratio: float, low: float, high: float, threshold: float) -> str:
    up = 1 + threshold
    if low >= 1 / up and high <= up:
        return "same"
    if low > 1 and ratio > up:
        return "slower"
    if high < 1 and ratio < 1 / up:
        return "faster"
    return "unclear"


# ----- the comparison core, shared with `fastest` ------------------------------------------------
def match_mode(sources: list[Source]) -> str:
    return "params" if any(s.kind == "reference" for s in sources) else "id"


def _key(e: Entry, by: str, any_precision: bool) -> tuple:
    k = e.key(by)
    return k[:-1] if any_precision else k


def match(sources: list[Source], by: str, any_precision: bool = False) -> dict[tuple, list[list[Entry]]]:
    """Every kernel of every source under one key (kernel id or DeepBench's parameters, with the
    precision unless `any_precision`): per key, each source's candidates in its own order.
    Runs and references are matched alike."""
    keyed: dict[tuple, list[list[Entry]]] = {}
    for i, s in enumerate(sources):
        for e in s.entries:
            keyed.setdefault(_key(e, by, any_precision), [[] for _ in sources])[i].append(e)
    return keyed


def pick(slots: list[list[Entry]]) -> list[Entry | None]:
    """One entry per source for a key: in the precision of the first source's entry where it has
    one (--any-precision pairs fp32 with fp32 before any other), else its first."""
    first = next((c[0] for c in slots if c), None)
    out: list[Entry | None] = []
    for cands in slots:
        same = [c for c in cands if first is not None and c.precision == first.precision]
        out.append(next(iter(same or cands), None))
    return out


@dataclass(frozen=True)
class Directions:
    """What each entry's compared time sums: the directions every entry timed (DeepBench's V100
    convolutions have no bwd_data, so the H100's bwd_data is left out beside them), or, where
    each timed one part under another name (an all-reduce's in_place beside a published time),
    that part. `note` names the choice when it leaves something out."""

    per_entry: tuple[tuple[str, ...], ...]
    common: tuple[str, ...]
    note: str = ""

    def us(self, i: int, entry: Entry) -> float:
        return sum(entry.parts_us[d] for d in self.per_entry[i])


def directions_of(entries: list[Entry]) -> Directions | None:
    """The directions the entries are compared on (None: nothing in common)."""
    if not entries:
        return None
    common = tuple(d for d in entries[0].parts_us if all(d in e.parts_us for e in entries[1:]))
    if common:
        partial = any(set(common) != set(e.parts_us) for e in entries)
        return Directions(tuple(common for _ in entries), common, "on " + "+".join(common) if partial else "")
    if all(len(e.parts_us) == 1 for e in entries):
        per = tuple(tuple(e.parts_us) for e in entries)
        names = sorted({p[0] for p in per})
        return Directions(per, (), "compared " + " with ".join(names) if len(names) > 1 else "")
    return None


def ratio_of(
    base_us: float,
    other_us: float,
    base_draws: np.ndarray | None,
    other_draws: np.ndarray | None,
    threshold: float,
    directions: tuple[str, ...],
    note: str,
    why: str = "",
) -> Ratio | None:
    """The ratio other/baseline with its bootstrap interval and verdict (None: a time of zero)."""
    if base_us <= 0 or other_us <= 0:
        return None
    ratio = other_us / base_us
    if base_draws is None or other_draws is None:
        return Ratio(
            base_us, other_us, ratio, math.nan, math.nan, "unclear", directions, "; ".join(n for n in (note, why) if n)
        )
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(other_draws / base_draws, [tail, 100 - tail])
    return Ratio(
        base_us,
        other_us,
        ratio,
        float(low),
        float(high),
        verdict(ratio, float(low), float(high), threshold),
        directions,
        note,
    )


class Draws:
    """Resampled totals of many (entry, directions) at once: every run's sample sets go through
    one bootstrap (runner/analysis/bootstrap.py); a published figure is drawn uniformly within
    its rounding. Ask first (`want`), then `draw()` once, then read (`of`)."""

    def __init__(self) -> None:
        self._sets: list[tuple[float, ...]] = []
        # per (entry, directions): the sample sets' rows to sum, or a published total
        self._jobs: dict[tuple[int, tuple[str, ...]], list[int] | float] = {}
        self._done: dict[tuple[int, tuple[str, ...]], np.ndarray] = {}

    def want(self, entry: Entry, directions: tuple[str, ...], kind: str) -> str:
        """Register a total to draw; returns why it cannot be drawn ('' when it can)."""
        key = (id(entry), directions)
        if kind == "reference" or not entry.part_samples:
            self._jobs[key] = sum(entry.parts_us[d] for d in directions)
            return ""
        sets = [entry.part_samples.get(d, ()) for d in directions]
        if any(len(xs) < MIN_SAMPLES for xs in sets):
            return f"fewer than {MIN_SAMPLES} samples"
        if key not in self._jobs:
            self._jobs[key] = list(range(len(self._sets), len(self._sets) + len(sets)))
            self._sets += [tuple(xs) for xs in sets]
        return ""

    def draw(self, rng: np.random.Generator) -> None:
        medians = bootstrap_medians(self._sets, BOOTSTRAP_DRAWS, rng)
        half = PUBLISHED_RESOLUTION_US / 2
        for key, what in self._jobs.items():
            if isinstance(what, list):
                self._done[key] = medians[what].sum(axis=0)
            else:
                self._done[key] = rng.uniform(what - half, what + half, BOOTSTRAP_DRAWS)

    def of(self, entry: Entry, directions: tuple[str, ...]) -> np.ndarray | None:
        return self._done.get((id(entry), directions))


def compare(
    sources: list[Source], threshold: float = DEFAULT_THRESHOLD, by: str | None = None, any_precision: bool = False
) -> Comparison:
    """Every other source against the first, kernel by kernel, on the directions all the
    sources that ran a kernel timed (so a row's times and its verdicts are of the same work)."""
    by = by or match_mode(sources)
    cmp = Comparison(
        sources=sources, by=by, threshold=threshold, any_precision=any_precision, differences=differences(sources)
    )
    keyed = match(sources, by, any_precision)
    draws = Draws()
    pending = []
    for slots in keyed.values():
        if not slots[0]:
            continue
        entries = pick(slots)
        base = entries[0]
        assert base is not None  # the baseline has this key
        ok = [(i, e) for i, e in enumerate(entries) if e is not None and e.ok]
        dirs = directions_of([e for _, e in ok]) if base.ok and len(ok) > 1 else None
        why: dict[int, str] = {}
        if dirs is not None:
            for j, (i, e) in enumerate(ok):
                why[i] = draws.want(e, dirs.per_entry[j], sources[i].kind)
        pending.append((entries, ok, dirs, why))
    draws.draw(np.random.default_rng(SEED))
    for entries, ok, dirs, why in pending:
        ratios: list[Ratio | None] = [None] * (len(sources) - 1)
        if dirs is not None:
            at = {i: j for j, (i, _) in enumerate(ok)}
            base = entries[0]
            assert base is not None
            b_dirs = dirs.per_entry[at[0]]
            for i, e in ok[1:]:
                o_dirs = dirs.per_entry[at[i]]
                ratios[i - 1] = ratio_of(
                    dirs.us(at[0], base),
                    dirs.us(at[i], e),
                    draws.of(base, b_dirs),
                    draws.of(e, o_dirs),
                    threshold,
                    dirs.common,
                    dirs.note,
                    why[0] or why[i],
                )
        cmp.rows.append(Row(entries[0], tuple(entries[1:]), tuple(ratios)))
    for i in range(1, len(sources)):
        cmp.only_base.append([r.base for r in cmp.rows if r.others[i - 1] is None and r.base is not None])
        cmp.only_other.append([e for slots in keyed.values() if not slots[0] for e in slots[i]])
    return cmp
