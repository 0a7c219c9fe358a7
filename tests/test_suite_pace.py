"""tests/benchmarks/suite_pace.py on synthetic results: the binaries' table it reads (and refuses), the ratio per
operation and precision, what it says the pace is made of, its goal line and its families check."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepbench.kernels.catalog import by_id
from deepbench.kernels.results import KernelResult

from .conftest import load_benchmark
from .reports_synthetic import result

load_benchmark("where_time_went")  # suite_pace imports it as the scripts import each other
pace = load_benchmark("suite_pace")


def _conv(kernel_id: str, family: str, engine_from: str = "race", seconds: float = 3.0) -> KernelResult:
    r = result(by_id()[kernel_id], "fp32", lambda d: [10.0] * 5)
    record = {
        "engine": "2",
        "plan_name": f"eng2_{family}",
        "family": family,
        "engine_from": engine_from,
        "search": {"tried": 40, "built": 20, "raced": 10, "screened_out": 6, "ruled_out": 12, "spent_s": 0.2},
    }
    parts = tuple(p.model_copy(update={"info": {"cudnn": record}}) for p in r.parts)
    ended = r.started_at.__class__.fromtimestamp(r.started_at.timestamp() + seconds, r.started_at.tzinfo)
    return r.model_copy(update={"parts": parts, "ended_at": ended})


def test_the_binaries_table_is_read_summed_and_refused_with_its_line(tmp_path: Path) -> None:
    table = tmp_path / "t.tsv"
    table.write_text("# a comment\ntrain\tconv\tfp32\t19\tconv_bench train float\n\ntrain\tconv\tfp32\t1.5\tagain\n")
    rows = pace.read_binaries(table)
    assert rows[("train", "conv", "fp32")] == pace.Binary(20.5, "conv_bench train float; again")
    table.write_text("train\tconv\tfp32\t19\n")
    with pytest.raises(pace.TableError, match=r"t\.tsv:1: 4 tab-separated cells"):
        pace.read_binaries(table)
    table.write_text("train\tconv\tfp32\tsoon\tx\n")
    with pytest.raises(pace.TableError, match="'soon' is not a number"):
        pace.read_binaries(table)


def test_the_table_sets_the_harness_beside_the_binaries_and_says_what_the_pace_is_made_of() -> None:
    results = [_conv("conv/train/000", "WINOGRAD"), _conv("conv/train/001", "FFT", "cache")]
    binaries = {("?", "conv", "fp32"): pace.Binary(2.0, "conv_bench train float")}
    lines, wall = pace.report("run", results, None, binaries)
    row = next(line for line in lines if line.startswith("conv/fp32"))
    assert " 6.0 " in row and " 2.0 " in row and " 3.0 " in row  # 6 s of harness, 2 of the binary: 3x
    assert "engines cache 3, race 3" in row and "tried 40, built 20, raced 10, screened_out 6, ruled_out 12" in row
    assert wall == 6.0
    line, passed = pace.goal_line("run", wall, 5.0, results)
    assert not passed and "FAIL" in line and "2 of 2 kernels ok, 2 checked" in line
    assert pace.goal_line("run", wall, 10.0, results)[1]


def test_families_pass_where_the_warm_run_chose_the_cold_runs_families() -> None:
    cold = [_conv("conv/train/000", "WINOGRAD"), _conv("conv/train/001", "FFT")]
    warm = [_conv("conv/train/000", "WINOGRAD", "cache"), _conv("conv/train/001", "FFT", "cache")]
    lines, same = pace.families(cold, warm)
    assert same and "the same family 6" in lines[-1] and "cache 6" in lines[-1]
    lines, same = pace.families(cold, [warm[0], _conv("conv/train/001", "unnamed", "cache")])
    assert not same and "FAIL" in lines[-1] and any("cold eng2_FFT (FFT)" in line for line in lines)
