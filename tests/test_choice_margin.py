"""tests/benchmarks/choice_margin.py re-plays the engine race from recorded figures: its replay must
pick what engine_choice.choose picks from the same figures, or its counts would mean nothing."""

from __future__ import annotations

import random

import pytest

from deepbench.kernels.backends.engine_choice import Engine, choose
from deepbench.kernels.results import Check

from .test_interleaved import load

load("conv_repeatability")
choice_margin = load("choice_margin")


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("margin", [0.0, 0.01, 0.03])
def test_the_replay_picks_what_the_race_picked(seed: int, margin: float) -> None:
    rng = random.Random(seed)
    engines = [Engine(index=i, engine_id=i, knobs={}, name=f"eng{i}", rank=i) for i in range(8)]
    figures = {e.index: 20.0 * (1 + rng.uniform(0.0, 0.08)) for e in engines}
    wrong = {rng.randrange(8)} if seed % 3 == 0 else set()  # a candidate that fails its check

    def check(e: Engine) -> Check:
        return Check(passed=e.index not in wrong, method="reference-fp64", error=0.0, tolerance=1e-3)

    raced = choose(engines, lambda e, _limit: figures[e.index], check, margin=margin)
    assert choice_margin.replay(raced.table, margin) == raced.chosen.name


def test_the_replay_leaves_rejected_and_untimed_candidates_out() -> None:
    rows = [{"plan_name": "a", "rank": 0, "status": "rejected", "quick_us": 10.0},
            {"plan_name": "b", "rank": 1, "status": "passed", "quick_us": 20.0},
            {"plan_name": "c", "rank": 2, "status": "unchecked", "quick_us": 20.1},
            {"plan_name": "d", "rank": 3, "status": "rejected", "reason": "did not run"}]
    assert choice_margin.replay(rows, 0.01) == "b"
    assert choice_margin.replay(rows[:1], 0.03) is None


def test_a_runs_time_for_another_plan_is_its_race_figure_scaled_as_the_chosen_ones_was() -> None:
    rows = [{"plan_name": "a", "status": "chosen", "quick_us": 20.0},
            {"plan_name": "b", "status": "passed", "quick_us": 19.0}]
    assert choice_margin.estimated_us(rows, 22.0, "a") == pytest.approx(22.0)  # the run's own median
    assert choice_margin.estimated_us(rows, 22.0, "b") == pytest.approx(19.0 * 22.0 / 20.0)


def test_a_folder_without_results_is_one_line_and_status_2(tmp_path, capsys) -> None:
    assert choice_margin.main([str(tmp_path), "--repeat", str(tmp_path)]) == 2
    assert "not a results folder" in capsys.readouterr().err
