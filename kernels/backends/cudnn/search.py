"""Every engine configuration cuDNN can build for one convolution direction's graph, offered to the race.

cudnnFind times every algorithm the library has; the heuristics' short list (modes A and FALLBACK, at
most 12 plans) missed the Winograd-nonfused engine cudnnFind picked for conv/train/026 fp32 forward
(269 us against the race's 902 us). So the candidates here are, in the order they are tried:

1. the first plan of each engine the heuristics offer (modes A, B and FALLBACK: graphs.HEURISTICS),
   in the heuristics' order;
2. every other engine of the operation graph (cuDNN's engine enumeration: the graph's global engine
   count), with its default knobs: the legacy families (Winograd nonfused, FFT, FFT tiling, implicit
   precomputed GEMM...) whether or not the heuristics rank them;
3. the heuristics' other plans (the same engines with other knobs, split-K variants among them), then
   the default knobs of the engines they offered;
4. every engine's knob choices: the grid of each knob's range (cudnn-frontend's `get_knobs_for_engine`:
   minimum, maximum and stride per knob), the engines in turns, each engine's grid from its sweep (its
   first point, then each knob through its values with the others at their first: `sweep_first`). Knobs
   the frontend has no type for (the backend's split-K among them) cannot be set from Python and keep
   their defaults; the heuristics' plans carry their own values of those (plans are told apart by cuDNN's
   name).

What makes most configurations fail, and how they are ruled out before they are built (each counted as
`ruled_out` beside its reason, so the census still says why): on an H200's fp32 forward of conv/train/026
(tests/benchmarks/results/conv-find-h200, call1-probe.log), 291 of the listing's 467 configurations failed
to build; most were the knob variants of the tensor-core engines fp32 excludes (every variant of engines
22, 23, 35, 38, 41, 45-48 failed, each engine's own configuration barred by the TENSOR_CORE filter), the
rest the whole of engines that do not serve the problem (5, 58, 79, 80: their default and every variant
failed). So (1) an engine one configuration of which a note filter bars (the precision's numerical notes,
or runtime compilation in the first pass) is barred with every knob choice: notes belong to the engine,
not to its knobs; (2) an engine whose default configuration failed to build and whose sweep built nothing
is not built further: a knob grid is the product of the values the sweep has each tried. An engine any
configuration of which built (the heuristics' plans included) keeps its whole grid.

One configuration of each engine comes first (steps 1 and 2, the first round), raced whole whatever
the per-direction time budget (engine_choice.RACE_BUDGET_S; up to FIRST_ROUND_CAP_S): every family
cudnnFind would time is reached before the budget spends on variants of one. A knob whose range holds
more than KNOB_VALUES_MAX values (cuDNN lists some from 0 to 2^32) is sampled: its ends and the powers
of two between them (the census counts such knobs). A duplicate is
the same plan name (cuDNN's name holds every knob it set) and is raced once. A configuration is not a
candidate where it fails to build, needs more workspace than the GPU can give
(engine_choice.workspace_limit), carries a numerical note the precision excludes (fp32 stays true fp32:
no TENSOR_CORE, no DOWN_CONVERT_INPUTS engine) or, on the first pass, needs runtime compilation (NVRTC:
seconds per plan); each such one is counted in the search's census (engine_choice.Census), as is
everything the budget left untried.

cudnn-frontend 1.32's Python API gives no plan's numerical notes; cuDNN's own note filters
(`deselect_numeric_notes`) do read them, and a plan they bar fails to build with "Deselecting
execution plan". The winner's family is read the same way (`family`): on a fresh graph per note, its
engine is barred by that note's filter or not. Notes belong to the engine, not to its knobs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...precision import Precision
from . import engine_choice as engines
from . import graphs

# What cuDNN's frontend says when building a plan that a note (or workspace) filter barred.
BARRED = "Deselect"
# Numerical notes that name an engine's family (the winner's record says which it carries).
FAMILY_NOTES = ("WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6", "WINOGRAD_TILE_13x13", "FFT", "TENSOR_CORE")
UNNAMED = "unnamed"
FAMILY_KEYS = ("family", "numerical_notes", "behavior_notes")  # what `family` records
# A knob's range longer than this is sampled (knob_values): a grid over 2^32 values of one knob is
# billions of configurations that mostly fail to build, and the budget went to failed builds.
KNOB_VALUES_MAX = 32
RUNTIME_COMPILATION = "RUNTIME_COMPILATION"


@dataclass(frozen=True)
class Config:
    """One engine configuration to try: a heuristics plan (by its index) or an engine and knobs to create."""

    source: str  # "heuristics" or "enumeration"
    engine_id: int
    knobs: dict[str, int] = field(default_factory=dict)
    index: int | None = None  # in the graph's plan list, for a heuristics plan
    first_round: bool = False  # one configuration of its engine, raced whatever the budget


@dataclass
class KnobRange:
    """One knob of an engine: cudnn.knob_type member name and its values (minimum to maximum by stride)."""

    name: str
    values: Sequence[int]
    sampled: bool = False  # the range was wider than KNOB_VALUES_MAX: its ends and powers of two between


def knob_grid(ranges: list[KnobRange]) -> Iterator[dict[str, int]]:
    """Every combination of the knobs' values (the last knob varies fastest); nothing for an engine without knobs."""
    if not ranges:
        return
    for combo in itertools.product(*(r.values for r in ranges)):
        yield {r.name: v for r, v in zip(ranges, combo, strict=True)}


def grid_size(ranges: list[KnobRange]) -> int:
    return math.prod(len(r.values) for r in ranges) if ranges else 0


def ordered(
    heuristic: list[Config], engine_ids: list[int], grids: dict[int, list[KnobRange]], grid_cap: int | None = None
) -> Iterator[Config]:
    """The order the module docstring gives: one configuration per engine, then the rest (at most
    `grid_cap` of each engine's knob grid where given: a listing that samples every engine's grid)."""
    first_of: dict[int, Config] = {}
    rest: list[Config] = []
    for c in heuristic:
        if c.engine_id in first_of:
            rest.append(c)
        else:
            first_of[c.engine_id] = c
    yield from (dataclasses.replace(c, first_round=True) for c in first_of.values())
    yield from (Config("enumeration", eid, first_round=True) for eid in engine_ids if eid not in first_of)
    yield from rest
    yield from (Config("enumeration", eid) for eid in engine_ids if eid in first_of)
    # the engines' grids in turns (one point of each engine, then the next of each): a budget spent in
    # the grids has sampled every engine's, not exhausted the first engine's
    turns = [_grid_configs(eid, grids.get(eid, []), grid_cap) for eid in engine_ids]
    for config in itertools.chain.from_iterable(itertools.zip_longest(*turns)):
        if config is not None:
            yield config


def _grid_configs(engine_id: int, ranges: list[KnobRange], cap: int | None) -> Iterator[Config]:
    return (Config("enumeration", engine_id, knobs) for knobs in itertools.islice(sweep_first(ranges), cap))


def sweep(ranges: list[KnobRange]) -> list[dict[str, int]]:
    """An engine's sweep: its grid's first point, then each knob through its other values with every other
    knob at its first value (one knob at a time: every value of every knob tried once)."""
    if not ranges:
        return []
    base = {r.name: r.values[0] for r in ranges}
    return [base] + [{**base, r.name: v} for r in ranges for v in list(r.values)[1:]]


def sweep_first(ranges: list[KnobRange]) -> Iterator[dict[str, int]]:
    """Every point of the grid once, the sweep's first (knob_grid's order after it)."""
    first = sweep(ranges)
    yield from first
    seen = {tuple(sorted(p.items())) for p in first}
    yield from (p for p in knob_grid(ranges) if tuple(sorted(p.items())) not in seen)


def knob_ranges(cudnn: Any, listed: list[Any]) -> list[KnobRange]:
    """The backend knobs cudnn-frontend lists for an engine (`get_knobs_for_engine`), with their values;
    frontend-only knobs (no backend counterpart) are left out. A knob whose fields this frontend names
    otherwise than 1.32 does (type, min_value, max_value, stride) raises AttributeError, which the
    caller counts: the engine is then tried with its default knobs only."""
    out = []
    for k in listed:
        kind = _field(k, "type", "knob_type")
        if cudnn.is_frontend_knob_type(kind):
            continue
        name = str(getattr(kind, "name", kind)).split(".")[-1].upper()
        if name == "NOT_SET":
            continue
        lo, hi = int(_field(k, "min_value", "minValue")), int(_field(k, "max_value", "maxValue"))
        step = int(getattr(k, "stride", 1) or 1)
        values = knob_values(lo, hi, max(step, 1))
        out.append(KnobRange(name, values, sampled=len(values) < len(range(lo, hi + 1, max(step, 1)))))
    return out


def knob_values(lo: int, hi: int, step: int) -> Sequence[int]:
    """A knob's values from `lo` to `hi` by `step`: all of them up to KNOB_VALUES_MAX, else the ends and
    the powers of two between them that the stride allows (tile sizes, split-K slices and the like are
    powers of two where they are wide)."""
    whole = range(lo, hi + 1, step)
    if len(whole) <= KNOB_VALUES_MAX:
        return whole
    powers = (1 << i for i in range(max(hi, 1).bit_length() + 1))
    inner = [v for v in powers if lo < v < hi and (v - lo) % step == 0]
    return [lo, *inner, whole[-1]]


def _field(obj: Any, *names: str) -> Any:
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError(f"cudnn-frontend's knob has none of {', '.join(names)}")


class Search:
    """The candidates of one graph, built lazily while the budget lasts, and the census of what happened to each."""

    def __init__(
        self,
        cudnn: Any,
        g: Any,
        precision: Precision,
        compiled: bool,
        workspace_limit: int,
        budget: engines.Budget,
        grid_cap: int | None = None,
        log: list[dict[str, Any]] | None = None,
    ) -> None:
        """`grid_cap`: at most so many of each engine's knob grid (all where None, as the race tries them);
        `log`: where a row per configuration tried goes (tests/benchmarks/conv_engines.py lists them)."""
        self.cudnn, self.g, self.compiled, self.workspace_limit, self.budget = (
            cudnn,
            g,
            compiled,
            workspace_limit,
            budget,
        )
        offer_plans(cudnn, g)
        # first pass: precompiled engines only (cuDNN's filter); later pass: only those that compile at run
        # time. cudnn-frontend 1.32's Python graph has no select_behavior_notes, so that pass reads each
        # configuration's behaviour notes before building it (_outcome): the precompiled ones were raced before.
        if not compiled:
            g.deselect_behavior_notes([cudnn.behavior_note.RUNTIME_COMPILATION])
        notes = graphs.TYPES[precision].excluded_notes
        if notes:
            g.deselect_numeric_notes([getattr(cudnn.numerical_note, n) for n in notes])
        heuristic = []
        for i in range(g.get_execution_plan_count()):
            try:
                eid, knobs = g.get_engine_and_knobs_at_index(i)
            except Exception:  # noqa: BLE001 - listed but unreadable: still tried by its index
                eid, knobs = -1 - i, {}
            heuristic.append(Config("heuristics", int(eid), _knob_names(knobs), i))
        try:
            engine_count = int(g.get_engine_count())
        except Exception:  # noqa: BLE001 - the graph cannot say: the heuristics' plans alone (engines: 0)
            engine_count = 0
        grids: dict[int, list[KnobRange]] = {}
        unreadable = 0
        for eid in range(engine_count):
            try:
                listed = g.get_knobs_for_engine(eid)
            except Exception:  # noqa: BLE001 - an engine that does not serve this graph
                continue
            try:
                grids[eid] = knob_ranges(cudnn, listed)
            except AttributeError:
                grids[eid], unreadable = [], unreadable + 1
        self.census = engines.Census(
            engines=engine_count,
            engines_for_graph=len(grids),
            knobs_unreadable=unreadable,
            knobs_sampled=sum(r.sampled for ranges in grids.values() for r in ranges),
            enumerated=len(heuristic) + sum(1 + grid_size(r) for r in grids.values()),
            budget_s=budget.seconds,
            setup_s=budget.spent_s,
        )
        self._configs = ordered(heuristic, sorted(grids), grids, grid_cap)
        self.log = log
        self._seen: set[str] = set()
        self._rank = 0
        self.ruling = Ruling({eid: len(sweep(r)) for eid, r in grids.items()})

    def finish(self, table: list[dict[str, Any]]) -> dict[str, Any]:
        """The census's record once the race over these candidates ended (`table`: engine_choice's rows):
        what it timed and rejected, the seconds spent, and whether the budget left configurations untried
        (the race may stop drawing before this search notices)."""
        self.budget.held = False  # the race is over: the census reads the budget's own limit
        census = self.census
        census.count_race(table)
        census.spent_s = self.budget.spent_s
        census.budget_exhausted |= self.budget.exhausted() and census.tried < census.enumerated
        return census.record()

    @property
    def offered(self) -> int:
        """Candidates offered so far."""
        return self._rank

    def candidates(self) -> Iterator[engines.Engine]:
        """Each distinct configuration that builds and fits, in the order above, until the budget is spent."""
        for c in self._configs:
            self.budget.held = c.first_round  # engine_choice.choose asks the same budget between draws
            if self.budget.exhausted() and self._rank:  # at least one candidate, whatever the budget
                self.census.budget_exhausted = True
                return
            e = self._try(c)
            if e is not None:
                yield e

    def _try(self, c: Config) -> engines.Engine | None:
        e, outcome = self._outcome(c)
        if self.log is not None:
            row: dict[str, Any] = {"source": c.source, "engine_id": c.engine_id, "knobs": c.knobs, "outcome": outcome}
            if e is not None:
                row.update(plan_name=e.name, workspace_bytes=e.workspace, knobs=e.knobs, index=e.index)
            self.log.append(row)
        return e if outcome == "candidate" else None

    def _outcome(self, c: Config) -> tuple[engines.Engine | None, str]:
        """The configuration built (where it built) and what became of it: 'candidate', 'duplicate' or a rejection."""
        census = self.census
        census.tried += 1
        ruled = self.ruling.verdict(c.engine_id)
        if ruled:
            census.reject(ruled)
            census.ruled_out += 1
            return None, ruled
        index = c.index
        try:
            if index is None:
                self.g.create_execution_plan(c.engine_id, typed_knobs(self.cudnn, c.knobs))
                index = self.g.get_execution_plan_count() - 1
            if self.compiled and not self._compiles_at_run_time(index):
                census.reject("precompiled")
                self.ruling.barred(c.engine_id, "precompiled")
                return None, "precompiled"
            e = built(self.g, index, rank=self._rank)
        except Exception as exc:  # noqa: BLE001 - a configuration this GPU or graph cannot build
            why = self._why_not(index, exc)
            census.reject(why)
            self.ruling.failed(c, why)
            return None, why
        self.ruling.built(c.engine_id)
        census.built += 1
        key = e.name or e.spec
        if key in self._seen:
            census.duplicates += 1
            return e, "duplicate"
        self._seen.add(key)
        if e.workspace > self.workspace_limit:
            census.reject("over_workspace")
            return e, "over_workspace"
        e.source = c.source
        self._rank += 1
        return e, "candidate"

    def _compiles_at_run_time(self, index: int) -> bool:
        """Whether the created (not yet built) plan at `index` carries RUNTIME_COMPILATION; True where its
        notes cannot be read (the plan is then raced again rather than lost)."""
        try:
            notes = {note_name(n) for n in self.g.get_behavior_notes_for_plan_at_index(index)}
        except Exception:  # noqa: BLE001 - notes unreadable here
            return True
        return RUNTIME_COMPILATION in notes

    def _why_not(self, index: int | None, exc: Exception) -> str:
        """Why a configuration did not build: barred by a note filter (which, where cuDNN says), or not buildable."""
        if BARRED not in str(exc) or index is None:
            return "failed_to_build"
        try:
            behavior = {note_name(n) for n in self.g.get_behavior_notes_for_plan_at_index(index)}
        except Exception:  # noqa: BLE001 - notes unreadable: the filter's kind is unknown
            return "excluded_by_notes"
        if (RUNTIME_COMPILATION in behavior) != self.compiled:
            return "runtime_compiled" if not self.compiled else "precompiled"
        return "excluded_numerics"


# The rejections that are the engine's, whatever its knobs: a note filter barred it (module docstring, rule 1).
ENGINE_NOTES = ("excluded_numerics", "runtime_compiled", "precompiled", "excluded_by_notes")
UNBUILDABLE = "failed_to_build"


@dataclass
class Ruling:
    """Which engines are ruled out before their next configuration is built (the module docstring's two
    rules): `sweeps` holds each engine's sweep length (search.sweep)."""

    sweeps: dict[int, int]
    _out: dict[int, str] = field(default_factory=dict)  # engine -> the reason its configurations are rejected
    _built: set[int] = field(default_factory=set)
    _default_failed: set[int] = field(default_factory=set)
    _sweep_failed: dict[int, int] = field(default_factory=dict)

    def verdict(self, engine_id: int) -> str:
        """The reason the engine's configurations are rejected unbuilt ('' : build this one)."""
        return self._out.get(engine_id, "")

    def barred(self, engine_id: int, why: str) -> None:
        if engine_id >= 0:  # a listed plan whose engine could not be read has a negative id: nothing to rule
            self._out[engine_id] = why

    def built(self, engine_id: int) -> None:
        self._built.add(engine_id)

    def failed(self, c: Config, why: str) -> None:
        """A configuration did not build for `why`: its engine is barred where the reason is a note's, and
        ruled out once its default and whole sweep failed and nothing of it built."""
        if why in ENGINE_NOTES:
            self.barred(c.engine_id, why)
            return
        if why != UNBUILDABLE or c.source != "enumeration" or c.engine_id in self._built:
            return
        if not c.knobs:
            self._default_failed.add(c.engine_id)
        else:
            self._sweep_failed[c.engine_id] = self._sweep_failed.get(c.engine_id, 0) + 1
        swept = self._sweep_failed.get(c.engine_id, 0) >= self.sweeps.get(c.engine_id, 0)
        if c.engine_id in self._default_failed and swept:
            self.barred(c.engine_id, UNBUILDABLE)


def offer_plans(cudnn: Any, g: Any) -> None:
    """The plans cuDNN's heuristics offer for the graph (graphs.HEURISTICS, in order), not yet built.
    A mode this cudnn-frontend lacks is skipped."""
    modes = [getattr(cudnn.heur_mode, m) for m in graphs.HEURISTICS if hasattr(cudnn.heur_mode, m)]
    g.create_execution_plans(modes)


def built(g: Any, index: int, rank: int = 0) -> engines.Engine:
    """The plan at `index`, built: its engine id, listed knobs, cuDNN's name and workspace (raises where
    it was barred or this GPU cannot build it)."""
    g.build_plan_at_index(index)
    engine_id, knobs = g.get_engine_and_knobs_at_index(index)
    return engines.Engine(
        index=index,
        engine_id=int(engine_id),
        knobs=_knob_names(knobs),
        name=str(g.get_plan_name_at_index(index)),
        workspace=int(g.get_workspace_size_plan_at_index(index)),
        rank=rank,
    )


def typed_knobs(cudnn: Any, knobs: dict[str, int]) -> dict[Any, int]:
    """{name: value} -> {cudnn.knob_type: value} (AttributeError for a knob this cudnn-frontend lacks)."""
    return {getattr(cudnn.knob_type, name): value for name, value in knobs.items()}


def _knob_names(knobs: dict[Any, int]) -> dict[str, int]:
    """{cudnn.knob_type: value} -> {name: value}, without the NOT_SET entry the frontend reports
    (which it cannot take back when a plan is re-created from the knobs)."""
    named = {str(getattr(k, "name", k)).upper(): int(v) for k, v in knobs.items()}
    named.pop("NOT_SET", None)
    return named


def note_name(note: Any) -> str:
    return str(getattr(note, "name", note)).split(".")[-1].upper()


def family(cudnn: Any, fresh_graph: Callable[[], Any], e: engines.Engine) -> dict[str, Any]:
    """The family cuDNN names for the plan's engine: its behaviour notes, and the FAMILY_NOTES it carries
    (each found by barring that note on a fresh graph holding only this engine: a plan not barred is
    built, so an engine compiled at run time is named by its behaviour notes alone, sparing a
    compilation per note); "unnamed" where cuDNN names none."""
    behavior: list[str] = []
    try:
        g = fresh_graph()
        g.create_execution_plan(e.engine_id, typed_knobs(cudnn, e.knobs))
        notes = g.get_behavior_notes_for_plan_at_index(g.get_execution_plan_count() - 1)
        behavior = sorted(n for n in map(note_name, notes) if n not in ("NOT_SET", "TYPE_COUNT"))
    except Exception:  # noqa: BLE001 - behaviour notes unreadable here: the numerical ones still name it
        behavior = []
    numerical = []
    for note in FAMILY_NOTES if RUNTIME_COMPILATION not in behavior else ():
        member = getattr(cudnn.numerical_note, note, None)
        if member is None:
            continue
        g = fresh_graph()
        try:
            g.create_execution_plan(e.engine_id, typed_knobs(cudnn, e.knobs))
            g.deselect_numeric_notes([member])
            g.build_plan_at_index(g.get_execution_plan_count() - 1)
        except Exception as exc:  # noqa: BLE001 - barred by the note's filter: the engine carries it
            if BARRED in str(exc):
                numerical.append(note)
    names = numerical or behavior
    return {
        "family": ", ".join(names) if names else UNNAMED,
        "numerical_notes": numerical,
        "behavior_notes": behavior,
    }
