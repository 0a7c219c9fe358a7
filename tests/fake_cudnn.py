"""A test double of cudnn-frontend 1.32's Python graph (what the engine search, the race and the engine cache
call of it), a library of engines on it, and conv.Race on it (timed by a table, checked by a rule, no GPU):
tests/test_cudnn_search.py and tests/test_engine_cache.py use them."""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

from deepbench.kernels.backends.cudnn import conv, search
from deepbench.kernels.backends.cudnn.engine_cache import EngineCache
from deepbench.kernels.backends.cudnn.engine_choice import Budget, Engine, Screen
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Check

BARRED = "[cudnn_frontend] Error: Deselecting execution plan"


@dataclass(frozen=True)
class _Knob:
    """cudnn.knob_type's member (its name), as the frontend's dicts key knobs."""

    name: str


@dataclass(frozen=True)
class _KnobInfo:
    """What get_knobs_for_engine lists for a knob."""

    type: _Knob
    min_value: int
    max_value: int
    stride: int = 1


@dataclass
class _Engine:
    numerical: tuple[str, ...] = ()
    behavior: tuple[str, ...] = ()
    knobs: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (min, max)
    workspace: int = 0
    hidden: str = ""  # a knob the frontend does not list, in the plan's name only (engine 49's split-K)
    builds_with: dict[str, int] | None = None  # it builds only with these knob values (None: any; {}: never)


def _name(eid: int, knobs: dict[str, int], hidden: str = "") -> str:
    return f"eng{eid}" + hidden + "".join(f"_k{sorted(_KNOB_NUMBERS).index(k)}={v}" for k, v in sorted(knobs.items()))


_KNOB_NUMBERS = ("TILE_SIZE", "SPLIT_K_BUF", "STAGES")


class _Graph:
    """cudnn-frontend 1.32's pygraph as the search sees it (it has no select_behavior_notes): heuristics'
    plans, the engine enumeration, plans
    created from (engine, knobs), note filters that bar plans ("Deselecting execution plan"), engines
    that do not serve the graph, knob values that do not build (TILE_SIZE 3)."""

    def __init__(self, engines: dict[int, _Engine], heuristics: list[tuple[int, dict[str, int], str]], count: int):
        self.engines, self.heuristics, self.count = engines, heuristics, count
        self.plans: list[tuple[int, dict[str, int], str]] = []
        self.filters: list[tuple[str, str, bool]] = []  # (kind, note, keep)
        self.modes: list[str] = []
        self.built: list[int] = []  # the plans built, by index

    def create_execution_plans(self, modes: list[str]) -> None:
        assert not self.modes, "planning is one-shot"
        self.modes = list(modes)
        self.plans = list(self.heuristics)

    def get_execution_plan_count(self) -> int:
        return len(self.plans)

    def get_engine_count(self) -> int:
        return self.count

    def get_knobs_for_engine(self, eid: int) -> list[_KnobInfo]:
        if eid not in self.engines:
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED: engine does not serve this graph")
        return [_KnobInfo(_Knob(n), lo, hi) for n, (lo, hi) in self.engines[eid].knobs.items()]

    def create_execution_plan(self, eid: int, knobs: dict[_Knob, int]) -> None:
        if eid not in self.engines:
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")
        named = {k.name: v for k, v in knobs.items()}
        self.plans.append((eid, named, _name(eid, named)))

    def _barred(self, eid: int) -> bool:
        e = self.engines[eid]
        for kind, note, keep in self.filters:
            has = note in (e.behavior if kind == "behavior" else e.numerical)
            if has != keep:
                return True
        return False

    def build_plan_at_index(self, i: int) -> None:
        eid, knobs, _ = self.plans[i]
        if self._barred(eid):
            raise RuntimeError(BARRED)
        if knobs.get("TILE_SIZE") == 3:
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")
        needs = self.engines[eid].builds_with
        if needs is not None and (not needs or any(knobs.get(k) != v for k, v in needs.items())):
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED: this engine does not serve the problem")
        self.built.append(i)

    def get_engine_and_knobs_at_index(self, i: int) -> tuple[int, dict[_Knob, int]]:
        eid, knobs, _ = self.plans[i]
        return eid, {_Knob(k): v for k, v in knobs.items()} | {_Knob("NOT_SET"): 0}

    def get_plan_name_at_index(self, i: int) -> str:
        return self.plans[i][2]

    def get_workspace_size_plan_at_index(self, i: int) -> int:
        return self.engines[self.plans[i][0]].workspace

    def get_behavior_notes_for_plan_at_index(self, i: int) -> list[str]:
        return list(self.engines[self.plans[i][0]].behavior)

    def deselect_behavior_notes(self, notes: list[str]) -> None:
        self.filters += [("behavior", n, False) for n in notes]

    def deselect_numeric_notes(self, notes: list[str]) -> None:
        self.filters += [("numerical", n, False) for n in notes]


NOTES = ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "WINOGRAD", "WINOGRAD_TILE_4x4", "FFT", "WINOGRAD_TILE_6x6")
CUDNN = types.SimpleNamespace(
    heur_mode=types.SimpleNamespace(A="A", B="B", FALLBACK="FALLBACK"),
    behavior_note=types.SimpleNamespace(RUNTIME_COMPILATION="RUNTIME_COMPILATION"),
    numerical_note=types.SimpleNamespace(**{n: n for n in NOTES}),
    knob_type=types.SimpleNamespace(**{n: _Knob(n) for n in (*_KNOB_NUMBERS, "NOT_SET")}),
    is_frontend_knob_type=lambda k: False,
)
GiB = 1 << 30


def _library() -> dict[int, _Engine]:
    """Engine 0: implicit GEMM with knobs; 1: tensor cores (not fp32); 2: Winograd nonfused, no knobs, which
    the heuristics never offer; 3: FFT with a workspace beyond the limit; 4: compiled at run time.
    Engine 5 of the count does not serve the graph."""
    return {
        0: _Engine(knobs={"TILE_SIZE": (1, 3), "STAGES": (0, 1)}),
        1: _Engine(numerical=("TENSOR_CORE",), knobs={"TILE_SIZE": (1, 2)}),
        2: _Engine(numerical=("WINOGRAD", "WINOGRAD_TILE_4x4")),
        3: _Engine(numerical=("FFT",), workspace=3 * GiB),
        4: _Engine(behavior=("RUNTIME_COMPILATION",)),
    }


def _heuristics() -> list[tuple[int, dict[str, int], str]]:
    """Modes A, B, FALLBACK's list: engine 0 twice with the same listed knobs (one with a hidden split-K),
    the same plan again (offered by two modes), engine 1 (tensor cores) and engine 4 (compiled)."""
    return [
        (0, {"TILE_SIZE": 1}, "eng0_k2=1"),
        (1, {"TILE_SIZE": 1}, "eng1_k2=1"),
        (0, {"TILE_SIZE": 1}, "eng0_k0=43_k2=1"),
        (0, {"TILE_SIZE": 1}, "eng0_k2=1"),
        (4, {}, "eng4"),
    ]


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _check(passed: bool) -> Check:
    return Check(passed=passed, method="fake", error=0.0 if passed else 1.0, tolerance=1e-3)


class _Race(conv.Race):
    """conv.Race on the graph double: candidates timed by a table (by plan name, else by engine), checked by a
    rule (engines in `wrong` fail), the engine cache given (None: off), no GPU."""

    def __init__(
        self,
        library: dict[int, _Engine],
        wrong: set[int],
        times: dict[int | str, float],
        cache: EngineCache | None = None,
        heuristics: list[tuple[int, dict[str, int], str]] | None = None,
    ) -> None:
        from deepbench.kernels.catalog import by_id

        self.kk, self.precision, self.direction = by_id()["conv/train/000"], Precision.FP32, "fwd"
        self.library, self.wrong, self.times = library, wrong, times
        self.heuristics = _heuristics() if heuristics is None else heuristics
        self.backend = types.SimpleNamespace(engine_cache=cache, lib=CUDNN)  # type: ignore[assignment]
        self.channels_last = False
        self.passes: list[bool] = []
        self.timed_names: list[str] = []
        self.screened_names: list[str] = []
        self.screens_by: dict[int | str, float] = {}  # screen figures other than the timed ones
        self.unbound: set[str] = set()  # plans whose screen figure is the host's (bounds nothing)

    def fresh(self) -> _Graph:
        return _Graph(self.library, self.heuristics, count=6)

    def workspace_limit(self) -> int:
        return 2 * GiB

    def search(self, compiled: bool, budget: Budget, **listing: Any) -> search.Search:
        self.passes.append(compiled)
        return search.Search(CUDNN, self.fresh(), self.precision, compiled, 2 * GiB, budget, **listing)

    def timed(self, e: Engine, out_of_contest_us: float) -> float:
        self.timed_names.append(e.name)
        return self.times.get(e.name, self.times.get(e.engine_id, 50.0))  # by plan name, else by engine

    def screened(self, e: Engine) -> Screen:
        """The screen figure: `screens` by plan name or engine where given, else the timed figure; GPU-bound
        unless the plan is in `unbound`."""
        self.screened_names.append(e.name)
        us = self.screens_by.get(e.name, self.screens_by.get(e.engine_id, self.times.get(e.engine_id, 50.0)))
        if e.name in self.times and e.name not in self.screens_by:
            us = self.times[e.name]
        return Screen(us, e.name not in self.unbound)

    def refined(self, e: Engine) -> float:
        return self.times.get(e.name, self.times.get(e.engine_id, 50.0))

    def check_engine(self, e: Engine) -> Check:
        return _check(e.engine_id not in self.wrong)

    def family(self, e: Engine) -> dict[str, Any]:
        return search.family(CUDNN, lambda: _Graph(self.library, [], 6), e)
