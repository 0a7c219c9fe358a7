"""Which engine (cuDNN execution plan) runs a call: chosen reproducibly, only among correct ones.

Written for cuDNN's convolution engines (cudnn/conv.py); nothing here is cuDNN-specific or
needs a GPU, so any library that offers ranked candidates (cuBLASLt's algorithms, hipBLASLt's,
MIOpen's solutions) can use the same rule, and the rule is tested on the CPU.

PyTorch's `cudnn.benchmark` races cuDNN's algorithms once per shape and keeps the winner without
saying which it was; two H100s then picked different algorithms for a quarter of the training
convolutions (times halving or doubling between the machines). Here the candidates are every
engine configuration the library can build for the call (cudnn/search.py: cuDNN's heuristics in
modes A, B and FALLBACK, then every engine of the graph with each of its knob choices), tried in
that library's order while a per-direction time budget (RACE_BUDGET_S) lasts, and:

1. each candidate is screened by a few eager calls (its screen figure), then timed briefly by the
   harness's own GPU timer (a CUDA graph of calls timed by events: `timing.graph_events.quick_us`; a
   call of 100 us or more whose eager figure is already OUT_OF_CONTEST times the fastest so far keeps
   that figure) in the order of the screen figures, the fastest first wherever the search offered it,
   until no candidate left can come within REFINE_WINDOW of the fastest by the screen's noise (those keep
   their screen figure: `_screened_figures`); the contenders (within REFINE_WINDOW of the fastest) are
   timed again, longer, so that the noise of one short figure cannot decide between them;
2. candidates are checked in order of speed until one passes its correctness check: an engine
   whose output fails is never chosen, and the result lists it with its error (cuDNN offered
   int8 engines that computed wrong results on an H100, its default first one included);
3. every candidate within MARGIN of that fastest correct one is checked too, and of those that
   pass, the one the search offers first (cuDNN's heuristics' order first) is chosen. Timing
   noise between machines (a few percent) thus cannot flip the choice between two engines of
   about the same speed, and the choice is never more than MARGIN slower than the fastest correct candidate.

The engine chosen (its id, knobs and cuDNN's name for the plan) is recorded with every
direction, and `--cudnn-engine` (and `deepbench verify`) re-runs exactly that engine. The plan's
name (`eng49_k0=43_k2=5_k5=4_k14=4`: every knob cuDNN set, by the backend's knob numbers) is the
exact pin: cudnn-frontend's knob list leaves some knobs out (engine 49's split-K of 43 on an H100),
and a plan re-created from the listed knobs alone ran 12x slower than the one measured.
Engines that need runtime compilation (NVRTC: seconds per plan) are raced only where no
precompiled one computes the direction correctly; engines needing more workspace than the GPU can
give (workspace_limit: a fraction of its free memory) are not candidates; fp32 excludes engines that
down-convert to TF32. What the search found, built, raced and rejected, and what the budget left
untried, is counted (Census) and recorded with the choice: a spent budget is never silent.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...results import Check

# An engine this much slower than the fastest correct one still counts as as fast. 1%, not the 3% the
# published runs of 2026-11-24 used: re-played on their recorded races (choice_margin.py, tests/benchmarks/ at 9450c78),
# 3% left one direction per candidate pass 5-6% over another machine's fastest candidate, 1% none, while
# two runs on two machines still agreed within 3% for 96-97% of the directions (as at 3%). The train
# published with 1% (2026-11-25, GPU-bee61ecf): 413 of 413 directions within 5% of the fastest candidate.
MARGIN = 0.01
REFINE_WINDOW = 0.06  # candidates this close to the fastest are timed again, longer
# Seconds one direction's race may spend building and screening candidates (the checks of the ones
# that would be chosen always run), its first round apart: one configuration of every engine (cudnnFind's
# breadth: each algorithm once) is raced whole, up to FIRST_ROUND_CAP_S, and only the knob variants after
# it stop at the budget. The train suite has 282 convolution directions per precision; on H200s its races
# spent 171 s (fp32) and 149 s (fp16) at 0.4 s, 20 and 9 directions past 1 s (docs/evidence/conv-find-h200.md),
# each candidate built and graph-timed (the published server run: 44 raced a direction in 0.46 s, ~10 ms each).
# A candidate is now screened (a few eager calls) and graph-timed only where it can come near the leader, so
# 0.15 s should draw about as many as 0.4 s did: a GPU sitting's census says whether it does (tried and built
# per searched direction: tests/benchmarks/suite_pace.py).
RACE_BUDGET_S = 0.15
FIRST_ROUND_CAP_S = 3.0
# The later pass over engines cuDNN compiles at run time (NVRTC, ~0.15 s a plan on an H200), raced only
# where no precompiled engine computed the direction correctly (int8 on an H100 or H200): the engines'
# defaults and some knob variants. 30 s found int8 conv/inference_server/000's best variant at rank 29
# (32 us against the default's 147) but cost the 107 int8 convolutions an hour.
COMPILED_RACE_BUDGET_S = 4.0
# A race's table in the record keeps the fastest rows, every checked one and the chosen (the census
# counts the rest): hundreds of candidates per direction would swell a suite's results tenfold.
RECORDED_ROWS = 16
# A candidate whose first eager figure is this many times the fastest figure so far keeps that
# figure (timing.graph_events.quick_us): far outside REFINE_WINDOW, it cannot be chosen.
OUT_OF_CONTEST = 1.5
# A screened candidate's timed figure is taken to read at least this share of its GPU-bound screen figure
# (a few eager calls: their launch gaps the graph does not have), or the least share the direction's timed
# candidates showed, where lower: the early stop's noise (_screened_figures).
SCREEN_TRUST = 0.85
# The share of the GPU's free memory (when a direction's candidates are built) a candidate's workspace
# may take: DeepBench's 1 GiB limit hid engines cudnnFind times (Winograd nonfused, FFT need more); the
# rest stays for the direction's tensors and PyTorch's other allocations.
WORKSPACE_FREE_FRACTION = 0.5
PIN_ALL = "*"
SPEC = re.compile(r"^\s*(\d+)\s*(?::\s*(.*))?$")
PLAN_NAME = re.compile(r"^eng\d+(?:_k\d+=-?\d+)*$")  # cuDNN's name for a plan: engine id, then knob=value by number


def workspace_limit(free_bytes: int) -> int:
    """The most workspace a candidate may need, given the GPU's free memory."""
    return int(free_bytes * WORKSPACE_FREE_FRACTION)


class Budget:
    """Wall-clock seconds for one direction's race, from its creation (building candidates counts too).
    While `held` (the search's first round: one configuration per engine), it runs to FIRST_ROUND_CAP_S
    instead: a short budget must not leave a family untried that cudnnFind would time."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.held = False
        self._clock = clock
        self._start = clock()

    @property
    def spent_s(self) -> float:
        return self._clock() - self._start

    def exhausted(self) -> bool:
        return self.spent_s >= (max(self.seconds, FIRST_ROUND_CAP_S) if self.held else self.seconds)


# Why a configuration is not (or no longer) a candidate, as the census counts it.
REJECTIONS = (
    "wrong_output",  # its output failed the check
    "did_not_run",  # built, but its call failed
    "failed_to_build",  # the library could not build it for this problem on this GPU
    "over_workspace",  # needs more than workspace_limit
    "excluded_numerics",  # carries a numerical note the precision excludes (fp32: TF32 tensor cores)
    "runtime_compiled",  # compiles at run time: left to the later pass
    "precompiled",  # in the later pass: precompiled, raced before
    "excluded_by_notes",  # barred by a note filter whose kind the library did not say
)


@dataclass
class Census:
    """How many configurations a direction's search found and what became of each: the record of a
    race as wide as the library's, so that a spent budget or a narrow list shows."""

    engines: int = 0  # engine ids of the operation graph (the library's global count)
    engines_for_graph: int = 0  # those that serve this graph (their knobs could be listed)
    knobs_unreadable: int = 0  # of those, engines whose knob ranges could not be read (default knobs only)
    knobs_sampled: int = 0  # knobs whose range was too wide to try whole (search.KNOB_VALUES_MAX): sampled
    setup_s: float = 0.0  # of spent_s, building the graph and asking the heuristics and the enumeration
    family_s: float = 0.0  # of spent_s, after the race: naming the winner's family (search.family: a graph per note)
    enumerated: int = 0  # configurations: heuristics plans + each engine's default + its knob grid
    tried: int = 0
    built: int = 0
    duplicates: int = 0  # built, and the same plan (by name) as one tried before
    ruled_out: int = 0  # of `tried`, rejected unbuilt: their engine was barred or built nothing (search.Ruling)
    raced: int = 0  # quick-timed
    screened_out: int = 0  # of raced, kept the screen figure: they could not come near the fastest
    rejected: Counter[str] = field(default_factory=Counter)
    budget_s: float = 0.0  # (never NaN: a submission's JSON may not hold NaN)
    spent_s: float = 0.0
    budget_exhausted: bool = False

    def reject(self, reason: str) -> None:
        if reason not in REJECTIONS:
            raise ValueError(f"unknown rejection {reason!r} (one of {', '.join(REJECTIONS)})")
        self.rejected[reason] += 1

    @property
    def over_budget(self) -> int:
        """Configurations never tried because the budget was spent."""
        return self.enumerated - self.tried if self.budget_exhausted else 0

    def record(self) -> dict[str, Any]:
        return {
            "engines": self.engines,
            "engines_for_graph": self.engines_for_graph,
            "knobs_unreadable": self.knobs_unreadable,
            "knobs_sampled": self.knobs_sampled,
            "setup_s": self.setup_s,
            "family_s": self.family_s,
            "enumerated": self.enumerated,
            "tried": self.tried,
            "built": self.built,
            "duplicates": self.duplicates,
            "ruled_out": self.ruled_out,
            "raced": self.raced,
            "screened_out": self.screened_out,
            "rejected": {r: self.rejected[r] for r in REJECTIONS if self.rejected[r]},
            "over_budget": self.over_budget,
            "budget_s": self.budget_s,
            "spent_s": self.spent_s,
            "budget_exhausted": self.budget_exhausted,
        }

    def count_race(self, table: list[dict[str, Any]]) -> None:
        """Add a race's outcome (engine_choice.choose's table) to the census."""
        for row in table:
            if "quick_us" in row:
                self.raced += 1
            self.screened_out += bool(row.get("screened_out"))
            reason = str(row.get("reason", ""))
            if row["status"] == "rejected":
                self.reject("wrong_output" if reason.startswith("check failed") else "did_not_run")


class EngineError(ValueError):
    """A malformed engine pin (the message says the form)."""


@dataclass
class Engine:
    """One execution plan: its place in cuDNN's ranked list, and what identifies it anywhere."""

    index: int  # in the graph's plan list (heuristics' plans first: the same in every process)
    engine_id: int
    knobs: dict[str, int]
    name: str = ""
    workspace: int = 0
    rank: int = 0  # position among the candidates, in the order the library's search offers them
    source: str = ""  # where the search found it ("heuristics", "enumeration"); "" for a pin

    @property
    def spec(self) -> str:
        """The pin that re-creates this plan: 'ENGINE_ID[:KNOB=VALUE,...]' (knobs by cudnn.knob_type name)."""
        knobs = ",".join(f"{k}={v}" for k, v in sorted(self.knobs.items()))
        return f"{self.engine_id}:{knobs}" if knobs else str(self.engine_id)

    def record(self) -> dict[str, Any]:
        return {
            "engine": self.spec,
            "engine_id": self.engine_id,
            "knobs": dict(self.knobs),
            "plan_name": self.name,
            "workspace_bytes": self.workspace,
            "heuristic_index": self.index,
            **({"source": self.source} if self.source else {}),
        }


def parse_spec(spec: str) -> tuple[int, dict[str, int]]:
    """'34' or '34:TILE_SIZE=3,SPLIT_K_BUF=0' -> (34, {'TILE_SIZE': 3, 'SPLIT_K_BUF': 0})."""
    m = SPEC.match(spec)
    if not m:
        raise EngineError(
            f"malformed cuDNN engine '{spec}' (expected ENGINE_ID or ENGINE_ID:KNOB=VALUE,..., as "
            "results record it in info.cudnn.engine, or a plan's name such as eng49_k0=43_k2=5, as "
            "info.cudnn.plan_name records it)"
        )
    knobs: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip().lstrip("-").isdigit():
            raise EngineError(f"malformed knob '{item}' in cuDNN engine '{spec}' (expected KNOB=INTEGER)")
        knobs[name.strip().upper()] = int(value)
    return int(m.group(1)), knobs


def is_plan_name(spec: str) -> bool:
    """Whether a pin is cuDNN's name for a plan (as results record it in info.cudnn.plan_name)."""
    return bool(PLAN_NAME.match(spec.strip()))


def check_pin(spec: str) -> None:
    """EngineError unless the pin is a plan name or ENGINE_ID[:KNOB=VALUE,...]."""
    if not is_plan_name(spec):
        parse_spec(spec)


def pin_for(pins: dict[str, str], item_id: str, direction: str) -> str | None:
    """The engine pinned for this item's direction: '<item id>/<direction>', else '*'."""
    return pins.get(f"{item_id}/{direction}") or pins.get(PIN_ALL)


@dataclass
class Choice:
    chosen: Engine
    table: list[dict[str, Any]] = field(default_factory=list)
    fastest_correct_us: float = math.nan
    drawn: list[Engine] = field(default_factory=list)  # the candidate of each row of `table`, in its order

    def record(self) -> dict[str, Any]:
        rejected = [row for row in self.table if row["status"] == "rejected"]
        return {
            **self.chosen.record(),
            "chosen_by": f"fastest correct candidate, or one within {MARGIN:.0%} of it that the search offers "
            "earlier (cuDNN's heuristics first; kernels/backends/cudnn/engine_choice.py)",
            "fastest_correct_us": self.fastest_correct_us,
            "candidates": recorded_rows(self.table),
            "rejected": len(rejected),
        }


def recorded_rows(table: list[dict[str, Any]], keep: int = RECORDED_ROWS) -> list[dict[str, Any]]:
    """The race's rows worth keeping, in the table's order: the `keep` fastest, and every row that was
    checked (passed, chosen or rejected by its check)."""
    timed = sorted((r["quick_us"], i) for i, r in enumerate(table) if "quick_us" in r)
    fastest = {i for _, i in timed[:keep]}
    return [r for i, r in enumerate(table) if i in fastest or r["status"] != "unchecked"]


class NoCorrectEngine(RuntimeError):
    """Every candidate failed to run or failed its check: the direction fails with this list."""

    def __init__(self, message: str, table: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.table = table or []  # the race's rows, for the census


@dataclass(frozen=True)
class Screen:
    """A candidate's cheap first figure (a few eager calls after an untimed one: Race.screened): us per call,
    and whether it is the GPU's own (events.EagerFigure.gpu_bound), which a longer timing cannot read far
    below; a host-bound figure says nothing of the GPU's time."""

    us: float
    bound: bool


def choose(
    engines: Iterable[Engine],
    quick_us: Callable[[Engine, float], float],
    check: Callable[[Engine], Check],
    margin: float = MARGIN,
    refine: Callable[[Engine], float] | None = None,
    budget: Budget | None = None,
    screen: Callable[[Engine], Screen] | None = None,
) -> Choice:
    """The rule above. `quick_us(e, out_of_contest_us)` times a candidate (raising if it cannot
    run; it may stop at a first figure above `out_of_contest_us`, OUT_OF_CONTEST times the fastest
    so far), `refine` times a contender again for longer, `check` runs a candidate and checks its
    output. `engines` may be built while they are drawn; none is drawn once `budget` is spent (the
    caller's census says how many were left), and those timed are checked whatever the budget.
    With `screen`, every candidate drawn is screened first and timed in the order of its screen figure
    until the others cannot come near the fastest (`_screened_figures`)."""
    race = _Rows()
    if screen is None:
        return _chosen(
            _refined(_drawn_figures(engines, quick_us, budget, race), refine, race.rows), check, margin, race
        )
    left = _screened(engines, screen, budget, race)
    while True:
        timed, left = _timed_in_screen_order(left, quick_us, race)
        try:
            return _chosen(_refined(timed, refine, race.rows), check, margin, race)
        except NoCorrectEngine:
            if not left:
                raise  # every timed one was wrong: those screened out race among themselves, as a race of their own


@dataclass
class _Rows:
    """A race's table as it fills: a row per candidate drawn, by its index, and the candidate."""

    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    drawn: dict[int, Engine] = field(default_factory=dict)

    def add(self, e: Engine) -> dict[str, Any]:
        row = {"engine": e.spec, "plan_name": e.name, "rank": e.rank, "status": "unchecked"}
        self.rows[e.index], self.drawn[e.index] = row, e
        return row

    @staticmethod
    def failed(row: dict[str, Any], exc: Exception) -> None:
        row.update(status="rejected", reason=f"did not run: {type(exc).__name__}: {exc}"[:300])


def _drawn_figures(
    engines: Iterable[Engine], quick_us: Callable[[Engine, float], float], budget: Budget | None, race: _Rows
) -> list[tuple[float, Engine]]:
    """Each candidate timed as it is drawn, until the budget is spent."""
    timed: list[tuple[float, Engine]] = []
    fastest_us = math.inf  # the fastest first figure so far
    for e in engines:
        if budget is not None and budget.exhausted() and timed:
            break
        row = race.add(e)
        try:
            t = quick_us(e, fastest_us * OUT_OF_CONTEST)
        except Exception as exc:  # noqa: BLE001 - a plan that builds but cannot run is not a candidate
            race.failed(row, exc)
            continue
        row["quick_us"] = t
        fastest_us = min(fastest_us, t)
        timed.append((t, e))
    return timed


def _screened(
    engines: Iterable[Engine], screen: Callable[[Engine], Screen], budget: Budget | None, race: _Rows
) -> list[tuple[Screen, Engine]]:
    """Every candidate drawn while the budget lasts, with its screen figure."""
    screened: list[tuple[Screen, Engine]] = []
    for e in engines:
        if budget is not None and budget.exhausted() and screened:
            break
        row = race.add(e)
        try:
            first = screen(e)
        except Exception as exc:  # noqa: BLE001 - a plan that builds but cannot run is not a candidate
            race.failed(row, exc)
            continue
        row["screen_us"] = first.us
        screened.append((first, e))
    return screened


def _timed_in_screen_order(
    screened: list[tuple[Screen, Engine]], quick_us: Callable[[Engine, float], float], race: _Rows
) -> tuple[list[tuple[float, Engine]], list[tuple[Screen, Engine]]]:
    """The screened candidates timed in the order of their screen figures, the fastest first wherever the
    search offered it, until no candidate left can beat the leader by the noise: a GPU-bound screen figure
    times SCREEN_TRUST (or the least timed-over-screen ratio this direction's candidates showed, where
    lower) above the fastest timed figure by more than REFINE_WINDOW cannot come within it. Those are left
    (their rows keep the screen figure, `screened_out`, as an out-of-contest figure is kept); a host-bound
    screen figure bounds nothing, and its candidate is always timed. (timed figures, those left)"""
    timed: list[tuple[float, Engine]] = []
    left: list[tuple[Screen, Engine]] = []
    fastest_us, ratios = math.inf, [SCREEN_TRUST]
    for first, e in sorted(screened, key=lambda se: se[0].us):
        row = race.rows[e.index]
        if first.bound and first.us * min(ratios) > fastest_us * (1 + REFINE_WINDOW):
            row.update(quick_us=first.us, screened_out=True)
            left.append((first, e))
            continue
        row.pop("screened_out", None)
        try:
            t = quick_us(e, fastest_us * OUT_OF_CONTEST)
        except Exception as exc:  # noqa: BLE001 - a plan that builds but cannot run is not a candidate
            race.failed(row, exc)
            continue
        row["quick_us"] = t
        if first.bound:
            ratios.append(t / first.us)
        fastest_us = min(fastest_us, t)
        timed.append((t, e))
    return timed, left


def _refined(
    timed: list[tuple[float, Engine]], refine: Callable[[Engine], float] | None, rows: dict[int, dict[str, Any]]
) -> list[tuple[float, Engine]]:
    """The figures sorted, the contenders (within REFINE_WINDOW of the fastest) timed again where `refine`."""
    timed = sorted(timed, key=lambda te: te[0])
    contenders = [(t, e) for t, e in timed if t <= timed[0][0] * (1 + REFINE_WINDOW)] if timed else []
    if refine is not None and len(contenders) > 1:
        for t, e in contenders:
            rows[e.index].update(first_us=t, quick_us=refine(e))
        timed = sorted(((rows[e.index]["quick_us"], e) for _, e in timed), key=lambda te: te[0])
    return timed


def _chosen(timed: list[tuple[float, Engine]], check: Callable[[Engine], Check], margin: float, race: _Rows) -> Choice:
    """Checks in order of speed until one passes, every one within `margin` of it too, the earliest offered
    of those that pass chosen (the module's rules 2 and 3)."""
    rows = race.rows

    def passes(e: Engine) -> bool:
        c = check(e)
        rows[e.index].update(status="passed" if c.passed else "rejected", error=c.error, tolerance=c.tolerance)
        if not c.passed:
            rows[e.index]["reason"] = f"check failed ({c.method}: error {c.error} > tolerance {c.tolerance})"
        return c.passed

    fastest = next(((t, e) for t, e in timed if passes(e)), None)
    if fastest is None:
        raise NoCorrectEngine(
            "no cuDNN engine computed this direction correctly: "
            + "; ".join(f"{r['engine']}: {r.get('reason', r['status'])}" for r in rows.values()),
            list(rows.values()),
        )
    limit = fastest[0] * (1 + margin)
    eligible = [
        e
        for t, e in timed
        if t <= limit
        and (rows[e.index]["status"] == "passed" or (rows[e.index]["status"] == "unchecked" and passes(e)))
    ]
    chosen = min(eligible, key=lambda e: e.rank)
    rows[chosen.index]["status"] = "chosen"
    return Choice(chosen, list(rows.values()), fastest[0], list(race.drawn.values()))
