"""Where a kernel's wall time went (info.wall_s, kernels/harness/wall_info.py), recorded by a real
run on the CPU, and tests/benchmarks/where_time_went.py's sums of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.harness.wall_info import WallInfo
from deepbench.kernels.results import Status
from deepbench.kernels.results_file import read_results

from .conftest import load_benchmark

# The result's start and end are wall-clock readings taken outside the phases' monotonic ones.
CLOCKS_APART_S = 0.01


def test_every_measured_kernel_says_where_its_wall_time_went(smoke_run: Path) -> None:
    results = read_results(smoke_run / "results.jsonl")
    ok = [r for r in results if r.status is Status.OK]
    assert ok
    for r in ok:
        w = info_of(WallInfo, r.info).wall_s
        assert w is not None, r.id
        assert [*w.parts] == [p.direction for p in r.parts], r.id
        assert w.prepare > 0 and all(p.timing > 0 and p.check >= 0 and p.first_call > 0 for p in w.parts.values()), r.id
        wall = (r.ended_at - r.started_at).total_seconds()
        assert w.total <= wall + CLOCKS_APART_S, (r.id, w.total, wall)
        # the timer's seconds hold at least the samples it kept (their sum: n x median exceeds it where the
        # samples skew fast)
        for p in r.parts:
            m = p.measurement
            sampled_s = sum(m.samples_us) * m.calls_per_sample * 1e-6
            assert w.parts[p.direction].timing >= sampled_s, (r.id, p.direction)


def test_the_script_sums_the_phases_per_operation_and_counts_older_results_apart(
    smoke_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_benchmark("where_time_went")
    results = read_results(smoke_run / "results.jsonl")
    found = script.groups(results)
    ops = {(r.op, r.precision.name.value) for r in results}
    assert set(found) == ops
    for g in found.values():
        assert abs(sum(g.phases.values()) - g.wall) < 1e-6 * max(1.0, g.wall) + CLOCKS_APART_S * g.kernels
    older = [r.model_copy(update={"info": {k: v for k, v in r.info.items() if k != "wall_s"}}) for r in results]
    assert sum(g.untimed for g in script.groups(older).values()) == len(results)
    assert script.main([str(smoke_run)]) == 0
    out = capsys.readouterr().out
    assert all(f"{op}/{precision}" in out for op, precision in ops) and "of the run's" in out
    assert script.main([str(tmp_path / "nothing")]) == 2
    assert "no results folder" in capsys.readouterr().err
