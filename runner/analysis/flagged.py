"""How many results of a run carry a flag that makes their time less certain (noisy: IQR over
10% of the median; unconverged: stopped at the time cap before the noise target; throttled: a
clock held down; contended: other processes held the CPUs its threads used; clock-fell: the GPU's
clock fell while it was sampled), said where a run leaves the user's hands: `submit` prints it, `check --strict`
refuses a bundle with any (runner/commands/check.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from deepbench.kernels.results import KernelResult, Status

if TYPE_CHECKING:
    from .sources import Entry

DOUBT_FLAGS = ("noisy", "unconverged", "throttled", "contended", "clock-fell")


def flagged(results: Iterable[KernelResult]) -> dict[str, list[str]]:
    """Per flag, the ids of the ok results that carry it (a result may carry several)."""
    out: dict[str, list[str]] = {f: [] for f in DOUBT_FLAGS}
    for r in results:
        if r.status is Status.OK:
            for f in r.flags:
                if f in out:
                    out[f].append(r.id)
    return out


def flagged_line(results: list[KernelResult]) -> str:
    """'4 of 10 results are noisy or unconverged: 3 noisy, 2 unconverged' (or that none is)."""
    return tally_line(flagged(results), sum(1 for r in results if r.status is Status.OK))


def tally_line(by_flag: dict[str, list[str]], ok: int) -> str:
    """flagged_line's sentence from the tally itself: per flag the ids of the ok results that carry it
    (deepbench check makes it on its one pass over the results), and how many results are ok."""
    ids = {i for ids in by_flag.values() for i in ids}
    if not ids:
        return f"none of the {ok} ok results is flagged ({', '.join(DOUBT_FLAGS)})"
    counts = ", ".join(f"{len(by_flag[f])} {f}" for f in DOUBT_FLAGS if by_flag.get(f))
    return f"{len(ids)} of {ok} ok results are flagged, their times less certain: {counts}"


def flagged_text(label: str, e: Entry | None) -> str:
    """A source's flags on one kernel, named in a comparison's row: 'H200 noisy, unconverged'."""
    shown = [f for f in (e.flags if e is not None and e.ok else ()) if f in DOUBT_FLAGS]
    return f"{label} {', '.join(shown)}" if shown else ""
