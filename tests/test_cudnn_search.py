"""cuDNN's engine search as wide as cudnnFind (kernels/backends/cudnn/search.py) and the race's budget,
census and limits (engine_choice.py), on a test double of cudnn-frontend's graph (tests/fake_cudnn.py): what the
search offers, in which order, what it rules out unbuilt and why, what a spent budget leaves, how screening stops
the race early without missing the fastest, what the record says. (tests/test_gpu_native.py and
tests/benchmarks/conv_engines.py run the real library on a GPU.)"""

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
    _Engine,
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
    # the offered engines' defaults, then the knob grid from its sweep (TILE_SIZE through its values, then
    # STAGES, then the rest); tensor-core, runtime-compiled, over-workspace and unbuildable ones are not candidates
    assert names == [
        "eng0_k2=1",
        "eng2",
        "eng0_k0=43_k2=1",
        "eng0",
        "eng0_k1=0_k2=1",
        "eng0_k1=0_k2=2",
        "eng0_k1=1_k2=1",
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
    # engine 1's default and grid and engine 4's default, barred with their engine's first plan: never built
    assert c.ruled_out == 3 + 1
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


def test_an_engine_barred_by_a_note_or_building_nothing_is_ruled_out_unbuilt() -> None:
    """Engine 6 serves nothing: its default and its sweep (4 points of its 2 x 3 grid) fail, and the other 2
    points are never built; engine 7 builds only with STAGES 2: its default and first sweep points fail, a
    sweep point builds, and its whole grid is tried; engine 1 (tensor cores, fp32) is barred by its first plan."""
    library = {
        **_library(),
        6: _Engine(knobs={"TILE_SIZE": (1, 2), "STAGES": (0, 2)}, builds_with={}),
        7: _Engine(knobs={"TILE_SIZE": (1, 2), "STAGES": (0, 2)}, builds_with={"STAGES": 2}),
    }
    g = _Graph(library, _heuristics(), count=8)
    log: list[dict[str, Any]] = []
    s = search.Search(CUDNN, g, Precision.FP32, False, 2 * GiB, Budget(math.inf), log=log)
    names = [e.name for e in s.candidates()]
    rows = {eid: [r for r in log if r["engine_id"] == eid] for eid in (1, 6, 7)}
    built_by = {eid: sum(g.plans[i][0] == eid for i in g.built) for eid in (1, 6, 7)}
    assert len(rows[6]) == 1 + 6 and all(r["outcome"] == "failed_to_build" for r in rows[6])
    assert built_by[6] == 0 and len([i for i, p in enumerate(g.plans) if p[0] == 6]) == 1 + 4  # 2 never created
    assert len(rows[7]) == 1 + 6 and [n for n in names if n.startswith("eng7")] == ["eng7_k1=2_k2=1", "eng7_k1=2_k2=2"]
    assert built_by[1] == 0 and all(r["outcome"] == "excluded_numerics" for r in rows[1])
    assert s.census.ruled_out == 2 + 3 + 1  # engine 6's rest, engine 1's default and grid, engine 4's default
    assert s.census.tried == s.census.enumerated  # every configuration accounted for


def test_the_sweep_tries_every_value_of_every_knob_before_the_rest_of_the_grid() -> None:
    ranges = [search.KnobRange("TILE_SIZE", range(1, 4)), search.KnobRange("STAGES", range(2))]
    points = list(search.sweep_first(ranges))
    assert points[: 1 + 2 + 1] == [
        {"TILE_SIZE": 1, "STAGES": 0},
        {"TILE_SIZE": 2, "STAGES": 0},
        {"TILE_SIZE": 3, "STAGES": 0},
        {"TILE_SIZE": 1, "STAGES": 1},
    ]
    assert sorted(map(sorted, (p.items() for p in points))) == sorted(
        map(sorted, (p.items() for p in search.knob_grid(ranges)))
    )
    assert search.sweep([]) == [] and list(search.sweep_first([])) == []


def _planted(n: int, fastest_at: int) -> tuple[list[Engine], dict[int, float]]:
    """`n` candidates in the search's order, the fastest planted at `fastest_at` (10 us against 20-100 us)."""
    es = [Engine(index=i, engine_id=i, knobs={}, name=f"eng{i}", rank=i) for i in range(n)]
    times = {i: 20.0 + 80.0 * ((i * 7) % n) / n for i in range(n)}
    times[fastest_at] = 10.0
    return es, times


def test_the_early_stop_finds_a_planted_fastest_candidate_late_in_the_list() -> None:
    es, times = _planted(30, fastest_at=27)
    timed: list[int] = []

    def quick(e: Engine, _: float) -> float:
        timed.append(e.index)
        return times[e.index]

    screen = {i: engine_choice.Screen(t * 1.03, bound=True) for i, t in times.items()}  # eager: 3% over
    choice = choose(iter(es), quick, lambda e: _check(True), screen=lambda e: screen[e.index])
    assert choice.chosen.index == 27 and timed[0] == 27  # timed first, wherever the search offered it
    assert len(timed) < 5  # the others could not come within REFINE_WINDOW of it by the screen's noise
    out = [r for r in choice.table if r.get("screened_out")]
    assert len(out) == 30 - len(timed) and all(r["quick_us"] == r["screen_us"] for r in out)
    census = Census(enumerated=30, tried=30)
    census.count_race(choice.table)
    assert census.raced == 30 and census.screened_out == len(out)


def test_a_host_bound_screen_bounds_nothing_and_a_loose_screen_widens_the_stop() -> None:
    """A candidate whose screen figure is the host's is timed whatever it says; where a timed candidate read far
    below its GPU-bound screen figure, the others are judged with that ratio."""
    es, times = _planted(12, fastest_at=3)
    times[9] = 9.0  # the true fastest, its screen figure 40 us but host-bound
    timed: list[int] = []

    def quick(e: Engine, _: float) -> float:
        timed.append(e.index)
        return times[e.index]

    screens = {i: engine_choice.Screen(t, bound=True) for i, t in times.items()}
    screens[9] = engine_choice.Screen(40.0, bound=False)
    choice = choose(iter(es), quick, lambda e: _check(True), screen=lambda e: screens[e.index])
    assert choice.chosen.index == 9 and 9 in timed
    times[9], times[5] = 50.0, 10.3  # a runner-up within REFINE_WINDOW of the fastest (10 us)
    loose = {i: engine_choice.Screen(t * 2.5, bound=True) for i, t in times.items()}  # eager 2.5x every figure
    timed.clear()
    choice = choose(iter(es), quick, lambda e: _check(True), screen=lambda e: loose[e.index])
    # the first pair showed a ratio of 0.4: the runner-up's 25.75 us screen is not taken at SCREEN_TRUST's word
    assert timed == [3, 5] and choice.chosen.index == 3 and choice.table[5]["quick_us"] == 10.3


def test_where_every_timed_candidate_is_wrong_those_screened_out_race_among_themselves() -> None:
    es, times = _planted(10, fastest_at=2)
    timed: list[int] = []

    def quick(e: Engine, _: float) -> float:
        timed.append(e.index)
        return times[e.index]

    screen = {i: engine_choice.Screen(t, bound=True) for i, t in times.items()}
    choice = choose(iter(es), quick, lambda e: _check(e.index != 2), screen=lambda e: screen[e.index])
    second = min((i for i in times if i != 2), key=times.get)
    assert choice.chosen.index == second and second in timed  # chosen on a timed figure, not its screen's
    row = next(r for r in choice.table if r["plan_name"] == f"eng{second}")
    assert "screened_out" not in row and row["status"] == "chosen"


def test_screening_stops_drawing_at_the_budget_but_races_the_first_round_whole() -> None:
    clock = _Clock()
    budget = Budget(0.3, clock)
    _, s, _ = _search(budget=budget)

    def screen(e: Engine) -> engine_choice.Screen:
        clock.t += 0.4  # the first candidate alone spends the budget
        return engine_choice.Screen(1.0 + e.rank, bound=True)

    choice = choose(s.candidates(), lambda e, _: 1.0 + e.rank, lambda e: _check(True), budget=budget, screen=screen)
    assert [r["plan_name"] for r in choice.table] == ["eng0_k2=1", "eng2"]  # eng0's variants never drawn
