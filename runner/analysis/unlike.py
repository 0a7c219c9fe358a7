"""What differs between the runs a comparison sets side by side, and which of it changes the problem.

A ratio of two times means what it says only where both sides ran the same problem: the same backend (one
hands its library DeepBench's call, another the call its framework makes), the same padding, the same operands'
distribution (zeros draw less power) and the same tensor layouts. Those differences are `changes_problem`:
`deepbench compare` and `fastest` refuse to rank sources that differ in them unless `--allow-unlike` is given,
and then name them in their heading. What does not change the problem but may move the figures (library
versions, the harness's version, how long and how each kernel was sampled, the engine search's options, the
device's settings) is named in the heading as well. A published reference ran DeepBench's own binaries on
DeepBench's problem: it is left out here (what it drew is said beside the times: like_for_like.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .sources import Source

# Spec keys (sources.py load_run's flattened run record) whose difference changes the problem.
PROBLEM_KEYS = ("run.backend", "settings.pad", "settings.inputs")
PROBLEM_PATTERNS = (re.compile(r"settings\.backend_options\.[^.]+\.layout$"),)
# Spec keys named when they differ; any key under these prefixes.
NAMED_PREFIXES = ("run.tool", "run.platform", "settings.", "library.", "software.")
# Named nowhere: what differs between any two runs without meaning anything for their figures (the seed draws
# other values of the same distribution; a cache's path is where it lay, not what it held).
IGNORED = (re.compile(r"settings\.(seed|kernel_timeout_s)$"), re.compile(r"\.engine_cache$"))
# A spec one run records and another does not: its backend did not load that library, or the run predates
# the field; the record cannot tell which, so the heading claims neither.
UNRECORDED = "unrecorded"


@dataclass(frozen=True)
class Difference:
    key: str
    values: tuple[tuple[str, str], ...]  # (source label, value) for each run
    changes_problem: bool

    def text(self) -> str:
        return f"{self.key.removeprefix('settings.')}: " + " vs ".join(f"{v} ({label})" for label, v in self.values)


def changes_problem(key: str) -> bool:
    return key in PROBLEM_KEYS or any(p.search(key) for p in PROBLEM_PATTERNS)


def _named(key: str) -> bool:
    return changes_problem(key) or (key.startswith(NAMED_PREFIXES) and not any(p.search(key) for p in IGNORED))


def differences(sources: list[Source]) -> list[Difference]:
    """Each spec that differs between the runs among `sources` (problem-changing ones first); a run that did
    not record a spec another did reads as UNRECORDED."""
    runs = [s for s in sources if s.kind == "run"]
    if len(runs) < 2:
        return []
    keys = sorted({k for s in runs for k in s.specs if _named(k)}, key=lambda k: (not changes_problem(k), k))
    out = []
    for key in keys:
        values = tuple((s.label, s.specs.get(key, UNRECORDED)) for s in runs)
        if len({v for _, v in values}) > 1:
            out.append(Difference(key, values, changes_problem(key)))
    return out


def refusal(found: list[Difference], command: str) -> str:
    """The one line a command refuses unlike sources with ('' where they are alike in their problem)."""
    problem = [d.text() for d in found if d.changes_problem]
    if not problem:
        return ""
    return (
        f"these runs ran different problems ({'; '.join(problem)}), so their times do not compare like with like: "
        f"compare runs that agree on them, or say --allow-unlike to {command} them anyway (the heading names them)"
    )
