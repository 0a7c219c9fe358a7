"""cuDNN's engine search as wide as cudnnFind (kernels/backends/cudnn/search.py) and the race's budget,
census and limits (engine_choice.py), on a test double of cudnn-frontend's graph: what the search
offers, in which order, what it rejects and why, what a spent budget leaves, what the record says.
(tests/test_gpu_native.py and tests/benchmarks/conv_engines.py run the real library on a GPU.)"""

from __future__ import annotations

import itertools
import math
import types
from typing import Any

import pytest

from deepbench.kernels.backends.cudnn import engine_choice
from deepbench.kernels.backends.cudnn.engine_choice import Budget, Census, Engine, choose
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Check

pytest.importorskip("torch")

from deepbench.kernels.backends.cudnn import conv, search

from .fake_cudnn import (
    CUDNN,
    GiB,
    _check,
    _Clock,
    _Graph,
    _heuristics,
    _Knob,
    _KnobInfo,
    _library,
    _Race,
)


def _search(precision: Precision = Precision.FP32, compiled: bool = False, budget: Budget | None = None, **kw: Any):
    g = _Graph(_library(), _heuristics(), count=6)
    log: list[dict[str, Any]] = []
    s = search.Search(CUDNN, g, precision, compiled, 2 * GiB, budget or Budget(math.inf), log=log, **kw)
    return g, s, log


def test_the_search_asks_every_heuristic_mode_and_enumerates_every_engine() -> None:
    g, s, _ = _search()
    assert g.modes == ["A", "B", "FALLBACK"]
    c = s.census
    # 5 heuristics plans; engines 0-4 serve the graph: defaults 5, grids 3*2 + 2 + 0 + 0 + 0
    assert (c.engines, c.engines_for_graph, c.enumerated) == (6, 5, 5 + 5 + 6 + 2)


def test_one_configuration_per_engine_first_then_the_rest_deduplicated_by_plan_name() -> None:
    _, s, log = _search()
    names = [e.name for e in s.candidates()]
    # first plan of each heuristics engine (eng0), the engines the heuristics never offer with their
    # default knobs (eng2: the Winograd-nonfused engine), the heuristics' other plans (the hidden split-K),
    # the offered engines' defaults, then the knob grid; tensor-core, runtime-compiled, over-workspace and
    # unbuildable ones are not candidates
    assert names == [
        "eng0_k2=1",
        "eng2",
        "eng0_k0=43_k2=1",
        "eng0",
        "eng0_k1=0_k2=1",
        "eng0_k1=1_k2=1",
        "eng0_k1=0_k2=2",
        "eng0_k1=1_k2=2",
    ]
    assert [e.rank for e in s.candidates()] == []  # drawn once: the generator is spent
    sources = {r["plan_name"]: r["source"] for r in log if r["outcome"] == "candidate"}
    assert sources["eng2"] == "enumeration" and sources["eng0_k2=1"] == "heuristics"
    c = s.census
    assert c.rejected == {
        "excluded_numerics": 1 + 1 + 2,  # engine 1: heuristics plan, default, grid of 2 (fp32: no TENSOR_CORE)
        "runtime_compiled": 2,  # engine 4: heuristics plan and default, left to the later pass
        "over_workspace": 1,  # engine 3's default: 3 GiB over the 2 GiB limit
        "failed_to_build": 2,  # engine 0 with TILE_SIZE 3
    }
    assert c.duplicates == 1  # eng0_k2=1, offered again by a second mode
    assert c.tried == c.enumerated and not c.budget_exhausted and c.over_budget == 0
    assert c.built == c.duplicates + len(names) + c.rejected["over_workspace"]
    assert c.tried == c.built + c.rejected["excluded_numerics"] + c.rejected["runtime_compiled"] + 2


def test_tf32_and_fp16_keep_tensor_core_engines() -> None:
    _, s, _ = _search(Precision.FP16)
    assert "eng1_k2=1" in [e.name for e in s.candidates()]
    assert "excluded_numerics" not in s.census.rejected


def test_the_later_pass_holds_only_engines_compiled_at_run_time() -> None:
    _, s, _ = _search(compiled=True)
    assert [e.name for e in s.candidates()] == ["eng4"]
    assert s.census.rejected["precompiled"] > 0 and s.census.duplicates == 1


def test_a_spent_budget_stops_the_search_and_is_counted() -> None:
    clock = _Clock()
    budget = Budget(1.0, clock)
    _, s, _ = _search(budget=budget)
    drawn = []
    for e in s.candidates():
        drawn.append(e.name)
        clock.t += 0.4  # each candidate costs 0.4 s
    assert drawn == ["eng0_k2=1", "eng2", "eng0_k0=43_k2=1"]
    c = s.census
    assert c.budget_exhausted and c.over_budget == c.enumerated - c.tried > 0
    assert c.record()["over_budget"] == c.over_budget


def test_the_first_round_is_raced_whole_whatever_the_budget() -> None:
    """One configuration of every engine (cudnnFind's breadth) is timed even where the budget is spent
    before it ends; only the variants after it stop at the budget."""
    clock = _Clock()
    budget = Budget(0.3, clock)
    _, s, _ = _search(budget=budget)

    def quick(e: Engine, _: float) -> float:
        clock.t += 0.4  # the first candidate alone spends the budget
        return 1.0 + e.rank

    choice = choose(s.candidates(), quick, lambda e: _check(True), budget=budget)
    assert [r["plan_name"] for r in choice.table] == ["eng0_k2=1", "eng2"]  # eng0's variants never drawn
    record = s.finish(choice.table)
    assert record["budget_exhausted"] and record["raced"] == 2 and not budget.held


def test_a_wide_knob_range_is_sampled_at_its_ends_and_powers_of_two() -> None:
    assert list(search.knob_values(1, 16, 1)) == list(range(1, 17))
    wide = search.knob_values(0, (1 << 32) - 1, 1)
    assert wide[0] == 0 and wide[-1] == (1 << 32) - 1 and len(wide) == 34 and 1 << 31 in wide
    assert list(search.knob_values(0, 100, 2)) == [0, 2, 4, 8, 16, 32, 64, 100]
    listed = [_KnobInfo(_Knob("TILE_SIZE"), 0, 4), _KnobInfo(_Knob("SPLIT_K_BUF"), 0, 1 << 20)]
    ranges = search.knob_ranges(CUDNN, listed)
    assert [r.sampled for r in ranges] == [False, True] and search.grid_size(ranges) == 5 * 22


def test_a_budget_spent_before_anything_is_offered_still_offers_one() -> None:
    clock = _Clock()
    budget = Budget(1.0, clock)
    clock.t = 5.0
    _, s, _ = _search(budget=budget)
    assert [e.name for e in s.candidates()] == ["eng0_k2=1"]
    assert s.census.budget_exhausted


def test_grid_cap_samples_each_engines_grid() -> None:
    _, s, log = _search(grid_cap=1)
    list(s.candidates())
    grid_rows = [r for r in log if r["source"] == "enumeration" and r["knobs"] and r["engine_id"] == 0]
    assert len(grid_rows) == 1


def test_the_race_draws_no_candidate_once_its_budget_is_spent_but_checks_those_timed() -> None:
    clock = _Clock()
    budget = Budget(1.0, clock)
    es = [Engine(index=i, engine_id=i, knobs={}, name=f"eng{i}", rank=i) for i in range(5)]
    times = {0: 30.0, 1: 10.0, 2: 20.0, 3: 1.0, 4: 1.0}

    def quick(e: Engine, _: float) -> float:
        clock.t += 0.4
        return times[e.index]

    checked: list[int] = []

    def check(e: Engine) -> Check:
        checked.append(e.index)
        return _check(e.index != 1)  # the fastest timed is wrong

    choice = choose(iter(es), quick, check, budget=budget)
    assert [r["plan_name"] for r in choice.table] == ["eng0", "eng1", "eng2"]  # 3 and 4 never drawn
    assert choice.chosen.index == 2 and checked[:2] == [1, 2]
    census = Census(enumerated=5, tried=3, budget_exhausted=True)
    census.count_race(choice.table)
    assert census.raced == 3 and census.rejected == {"wrong_output": 1} and census.over_budget == 2


def test_the_census_names_only_known_rejections_and_its_record_is_plain_data() -> None:
    census = Census(engines=3, enumerated=4)
    with pytest.raises(ValueError, match="unknown rejection"):
        census.reject("slow")
    census.reject("over_workspace")
    record = census.record()
    assert record["rejected"] == {"over_workspace": 1} and record["over_budget"] == 0
    from deepbench.kernels.backends.cudnn.declaration import CudnnPlan

    plan = CudnnPlan(engine="2", plan_name="eng2", search=record, family="WINOGRAD")
    assert plan.pin == "eng2" and plan.model_extra is not None and plan.model_extra["family"] == "WINOGRAD"
    assert CudnnPlan(engine="49:TILE_SIZE=5").pin == "49:TILE_SIZE=5"  # records from before the census


def test_the_workspace_limit_is_a_share_of_free_memory_not_one_gib() -> None:
    assert engine_choice.workspace_limit(80 * GiB) == int(80 * GiB * engine_choice.WORKSPACE_FREE_FRACTION)
    assert engine_choice.workspace_limit(80 * GiB) > GiB


def test_the_recorded_table_keeps_the_fastest_and_every_checked_row() -> None:
    table = [{"plan_name": f"eng{i}", "quick_us": float(100 - i), "status": "unchecked"} for i in range(40)]
    table[0]["status"] = "rejected"  # the slowest, but checked: kept
    table.append({"plan_name": "x", "status": "rejected", "reason": "did not run"})  # never timed: kept
    kept = engine_choice.recorded_rows(table, keep=4)
    assert [r["plan_name"] for r in kept] == ["eng0", "eng36", "eng37", "eng38", "eng39", "x"]


def test_the_winners_family_is_the_notes_cudnn_bars_it_for() -> None:
    engines = _library()

    def fresh() -> _Graph:
        g = _Graph(engines, [], count=6)
        g.modes = ["none"]
        return g

    winograd = Engine(index=0, engine_id=2, knobs={})
    fam = search.family(CUDNN, fresh, winograd)
    assert fam["family"] == "WINOGRAD, WINOGRAD_TILE_4x4" and fam["numerical_notes"] == [
        "WINOGRAD",
        "WINOGRAD_TILE_4x4",
    ]
    assert search.family(CUDNN, fresh, Engine(index=0, engine_id=0, knobs={"TILE_SIZE": 1}))["family"] == "unnamed"
    assert search.family(CUDNN, fresh, Engine(index=0, engine_id=4, knobs={}))["family"] == "RUNTIME_COMPILATION"


def test_a_pinned_plan_name_is_found_among_the_heuristics_plans_or_the_enumeration() -> None:
    from deepbench.kernels.backends.contract.base import Unsupported

    def graph() -> _Graph:
        return _Graph(_library(), _heuristics(), count=6)

    e = conv._pinned(CUDNN, graph(), "eng0_k0=43_k2=1")
    assert (e.index, e.engine_id, e.knobs, e.name) == (2, 0, {"TILE_SIZE": 1}, "eng0_k0=43_k2=1")
    # only in the enumeration: the Winograd-nonfused engine's default, and a knob-grid point of engine 0
    assert conv._pinned(CUDNN, graph(), "eng2").name == "eng2"
    assert conv._pinned(CUDNN, graph(), "eng0_k1=1_k2=2").knobs == {"TILE_SIZE": 2, "STAGES": 1}
    # the race's recorded knobs are tried before the grid
    g = graph()
    e = conv._pinned(CUDNN, g, "eng0_k1=1_k2=2", at=40, knobs={"TILE_SIZE": 2, "STAGES": 1})
    assert len(g.plans) == len(_heuristics()) + 1 and e.index == len(_heuristics())
    with pytest.raises(Unsupported, match="no plan named 'eng0_k1=7'"):
        conv._pinned(CUDNN, graph(), "eng0_k1=7")
    with pytest.raises(Unsupported, match="no plan named 'eng9'"):
        conv._pinned(CUDNN, graph(), "eng9")


def test_the_order_is_exhaustive_and_each_grid_point_appears_once() -> None:
    grids = {0: [search.KnobRange("TILE_SIZE", range(1, 4)), search.KnobRange("STAGES", range(2))]}
    heuristic = [search.Config("heuristics", 0, {"TILE_SIZE": 1}, 0)]
    configs = list(search.ordered(heuristic, [0, 1], grids))
    points = [c.knobs for c in configs if c.source == "enumeration" and c.knobs]
    assert len(points) == search.grid_size(grids[0]) == 6
    assert sorted(map(sorted, (p.items() for p in points))) == sorted(
        sorted({"TILE_SIZE": t, "STAGES": s}.items()) for t, s in itertools.product(range(1, 4), range(2))
    )
    assert [(c.source, c.engine_id, c.knobs) for c in configs[:2]] == [
        ("heuristics", 0, {"TILE_SIZE": 1}),
        ("enumeration", 1, {}),
    ]


def test_knob_ranges_leave_frontend_only_knobs_out_and_unreadable_ones_are_counted() -> None:
    cudnn = types.SimpleNamespace(is_frontend_knob_type=lambda k: k.name == "FRONTEND")
    listed = [
        _KnobInfo(_Knob("TILE_SIZE"), 0, 6, 2),
        _KnobInfo(_Knob("FRONTEND"), 0, 3),
        _KnobInfo(_Knob("NOT_SET"), 0, 0),
    ]
    assert search.knob_ranges(cudnn, listed) == [search.KnobRange("TILE_SIZE", range(0, 7, 2))]
    with pytest.raises(AttributeError, match="min_value"):
        search.knob_ranges(cudnn, [types.SimpleNamespace(type=_Knob("TILE_SIZE"), lowest=0, max_value=1)])

    class Odd(_Graph):
        def get_knobs_for_engine(self, eid: int) -> list[Any]:
            return [types.SimpleNamespace(type=_Knob("TILE_SIZE"))] if eid == 0 else super().get_knobs_for_engine(eid)

    s = search.Search(CUDNN, Odd(_library(), _heuristics(), 6), Precision.FP32, False, 2 * GiB, Budget(math.inf))
    names = [e.name for e in s.candidates()]
    assert s.census.knobs_unreadable == 1 and "eng0" in names  # engine 0: its default knobs, no grid
    assert not [n for n in names if n.startswith("eng0_k1")]


def test_the_race_records_its_census_and_the_winners_family() -> None:
    race = _Race(_library(), wrong={0}, times={0: 5.0, 2: 10.0})  # engine 0 fastest but wrong
    chosen, record = race.choose()
    assert chosen.name == "eng2" and record["family"] == "WINOGRAD, WINOGRAD_TILE_4x4"
    assert record["source"] == "enumeration" and race.passes == [False]
    census = record["search"]
    assert census["raced"] == 8 and census["rejected"]["wrong_output"] >= 1 and census["enumerated"] == 18
    assert census["spent_s"] >= 0 and census["budget_s"] == engine_choice.RACE_BUDGET_S
    assert 0 < census["family_s"] <= census["spent_s"]  # naming the family is part of the race's seconds


def test_where_no_precompiled_engine_is_correct_the_runtime_compiled_ones_race() -> None:
    race = _Race(_library(), wrong={0, 2}, times={})
    chosen, record = race.choose()
    assert chosen.name == "eng4" and race.passes == [False, True]
    assert record["runtime_compiled_allowed"] and record["earlier"][0]["search"]["rejected"]["wrong_output"] > 0
    assert record["family"] == "RUNTIME_COMPILATION"


def test_no_engine_at_all_is_unsupported_and_says_why() -> None:
    from deepbench.kernels.backends.contract.base import Unsupported

    library = {eid: e for eid, e in _library().items() if eid != 4}  # nothing compiled at run time
    race = _Race(library, wrong={0, 2}, times={})
    with pytest.raises(Unsupported, match=r"cuDNN offers no engine for this fp32 fwd convolution.*no cuDNN engine"):
        race.choose()


def test_a_race_that_stops_drawing_first_still_records_the_spent_budget() -> None:
    """engine_choice.choose stops drawing once the budget is spent, before the search itself notices:
    the census still says the budget left configurations untried."""
    clock = _Clock()
    budget = Budget(1.0, clock)
    _, s, _ = _search(budget=budget)

    def quick(e: Engine, _: float) -> float:
        clock.t += 0.6
        return 10.0 + e.index

    choice = choose(s.candidates(), quick, lambda e: _check(True), budget=budget)
    record = s.finish(choice.table)
    assert record["raced"] == 2 and record["budget_exhausted"]
    assert record["over_budget"] == record["enumerated"] - record["tried"] > 0 and record["spent_s"] == 1.2


def test_the_engines_grids_are_tried_in_turns() -> None:
    grids = {
        0: [search.KnobRange("TILE_SIZE", range(1, 4))],
        1: [search.KnobRange("STAGES", range(2))],
        2: [],
    }
    points = [(c.engine_id, c.knobs) for c in search.ordered([], [0, 1, 2], grids) if c.knobs]
    assert points == [
        (0, {"TILE_SIZE": 1}),
        (1, {"STAGES": 0}),
        (0, {"TILE_SIZE": 2}),
        (1, {"STAGES": 1}),
        (0, {"TILE_SIZE": 3}),
    ]
