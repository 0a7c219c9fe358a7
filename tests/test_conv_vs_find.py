"""tests/benchmarks/conv_vs_find.py without a GPU: the lines it feeds conv_find from real result records
(padded sizes, layout, the harness's tolerance rule), how it reads conv_find's output back (a hand-written
fixture in the loop's format: tests/fixtures/conv-find/README.md), the per-row flags, the SUMMARY counts
against issue 43's target, and usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepbench.kernels.precision import Precision, tolerance

from .conftest import load_benchmark

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "conv-find"
RUN = FIXTURES / "run"
OUTPUT = FIXTURES / "conv_find-output.txt"


load_benchmark("native_side_by_side")
cvf = load_benchmark("conv_vs_find")

FP32_FWD = "fp32 fwd 16 256 28 28 512 3 3 1 1 1 1 deepbench 1.000e-04 2.000e-03 0.100"


def dry_run_lines(capsys, *extra: str) -> list[str]:
    assert cvf.main([str(RUN), "--dry-run", *extra]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]


def test_lines_carry_the_recorded_padded_problem_the_layout_and_the_harness_tolerance(capsys) -> None:
    lines = dry_run_lines(capsys)
    assert lines[0] == FP32_FWD
    # int8: the padded channels the result records (c 192 -> as recorded), forward only, exact check
    assert "int8 fwd 1 192 28 28 32 5 5 2 2 1 1 deepbench 0.000e+00 0.000e+00 0.100" in lines
    assert len(lines) == 7  # 3 fp32 + 3 fp16 + 1 int8 directions, all >= 20 us
    # bwd_filter's reduction is N P Q: the tolerance kernels/precision.py gives it
    wgrad = next(line for line in lines if line.startswith("fp32 bwd_filter"))
    assert wgrad.split()[14] == f"{tolerance(Precision.FP32, 16 * 28 * 28):.3e}"
    harness = dry_run_lines(capsys, "--layout", "harness")
    assert {line.split()[13] for line in harness} == {"nchw", "nhwc"}  # as each result's info.layout says
    assert dry_run_lines(capsys, "--min-us", "100") == [line for line in lines if line.startswith("fp32")]


def test_the_output_is_read_by_its_echoed_input_line() -> None:
    found = cvf.parse_output(OUTPUT.read_text().splitlines())
    fwd = found[FP32_FWD]
    assert len(fwd.entries) == 8
    assert fwd.entries[0].algo == "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED"
    assert fwd.entries[2].check == "failed" and fwd.entries[6].error is None
    assert fwd.fastest is not None and fwd.fastest.best_us == pytest.approx(268.9)
    f16 = next(v for k, v in found.items() if k.startswith("fp16 fwd"))
    assert f16.fastest is not None and f16.fastest.best_us == pytest.approx(76.1)  # graph NaN: the host loop's
    wgrad = next(v for k, v in found.items() if k.startswith("fp32 bwd_filter"))
    assert wgrad.fastest is None and "correctly" in wgrad.error


def test_rows_flags_and_summary(tmp_path: Path, capsys) -> None:
    out = tmp_path / "side.json"
    assert cvf.main([str(RUN), "--from-output", str(OUTPUT), "--json", str(out)]) == 1  # targets not met
    printed = capsys.readouterr().out
    assert "SUMMARY conv fp32: 3 directions >= 20 us (1 without a cudnnFind figure)" in printed
    doc = json.loads(out.read_text())
    assert doc["compared"]["tf32_override"] == "0" and doc["compared"]["cudnn"] == "91900"
    summary = {s["precision"]: s for s in doc["summary"]}
    assert (summary["fp32"]["within"], summary["fp32"]["above"], summary["fp32"]["compared"]) == (1, 1, 2)
    assert (summary["fp16"]["within"], summary["fp16"]["above"], summary["fp16"]["layout_differs"]) == (2, 0, 3)
    assert summary["fp32"]["worst"][0].startswith("conv/train/026/fp32 fwd 902.2 vs 268.9 us (3.36x")
    rows = {(r["id"], r["direction"]): r for r in doc["rows"]}
    fwd = rows[("conv/train/026/fp32", "fwd")]
    assert fwd["ratio"] == pytest.approx(902.176022529602 / 268.9)
    assert fwd["harness_plan"] == "eng70_k2=4_k18=0" and not fwd["layout_differs"]
    assert fwd["cudnn_find_us"] == pytest.approx(268.5)  # cudnnFind's own figure for the winner
    int8 = rows[("conv/inference_server/028/int8", "fwd")]
    assert int8["layout_differs"] and int8["output_differs"] == "harness int32, conv_find int8"
    assert int8["find_layout"] == "nchw_vect_c"


def test_a_run_within_the_target_passes(tmp_path: Path, capsys) -> None:
    """Every direction's cudnnFind figure set to the harness's own time: all within 1.05x, exit 0."""
    wgrad_us = 235.167995095253  # the fixture's fp32 bwd_filter, as the harness recorded it
    lines = OUTPUT.read_text().splitlines()
    wgrad = next(line for line in lines if line.startswith("fp32 bwd_filter") and " error " in line)
    head = " ".join(wgrad.split()[: cvf.FIELDS])
    algo = "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 CUDNN_FMA_MATH"
    lines[lines.index(wgrad)] = f"{head} fastest {algo} {wgrad_us} nan nchw 0 3 2 1"
    lines = [line.replace(" 269.1200 268.9000 nchw", " 900.0000 900.0000 nchw") for line in lines]
    lines = [line.replace(" 70.5000 70.0000 nhwc", " 80.0000 80.0000 nhwc") for line in lines]
    lines = [line.replace(" 60.1000 60.1500 nchw_vect_c", " 72.0000 72.0000 nchw_vect_c") for line in lines]
    passing = tmp_path / "out.txt"
    passing.write_text("\n".join(lines) + "\n")
    assert cvf.main([str(RUN), "--from-output", str(passing)]) == 0
    assert capsys.readouterr().out.count(" PASS") == 3


def test_directions_under_min_us_are_not_counted() -> None:
    found = cvf.parse_output(OUTPUT.read_text().splitlines())
    problems, _ = cvf.build_problems(cvf.sbs.select_results([RUN], None, (0, 1)), "deepbench", 0.1, 0.0)
    rows = [cvf.make_row(p, found.get(p.line)) for p in problems]
    assert {s.precision for s in cvf.summarize(rows, min_us=100.0)} == {"fp32"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--seconds", "0"],
        ["--from-output", "/nonexistent/conv_find.txt"],
    ],
)
def test_usage_errors_are_one_line_and_status_2(argv: list[str], capsys) -> None:
    assert cvf.main([str(RUN), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("conv_vs_find: ") and len(err.strip().splitlines()) == 1


def test_output_in_another_format_is_refused(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{FP32_FWD} fastest WINOGRAD only-three-fields x\n")
    assert cvf.main([str(RUN), "--from-output", str(bad)]) == 2
    assert "line 1 is not conv_find's output" in capsys.readouterr().err


def test_a_folder_without_results_is_refused(tmp_path: Path, capsys) -> None:
    assert cvf.main([str(tmp_path), "--dry-run"]) == 2
    assert "not a deepbench-run results folder" in capsys.readouterr().err


def test_an_int8_fallback_voids_the_lines_before_it(tmp_path: Path) -> None:
    """conv_find's `fallback` line: NCHW_VECT_C could not run, the problem ran again in NHWC."""
    lines = OUTPUT.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("int8 fwd"))
    head = " ".join(lines[first].split()[: cvf.FIELDS])
    void = (
        f"{head} find 0 CUDNN_CONVOLUTION_FWD_ALGO_GEMM CUDNN_STATUS_SUCCESS 50.0 0 CUDNN_TENSOR_OP_MATH x failed 1.0"
    )
    lines[first:first] = [void, f"{head} fallback nchw_vect_c no algorithm cudnnFind returned computed it correctly"]
    lines = [line.replace(" nchw_vect_c 1536", " nhwc 1536") for line in lines]
    found = cvf.parse_output(lines)[head]
    assert len(found.entries) == 2 and found.fallback.startswith("nchw_vect_c no algorithm")
    problems, _ = cvf.build_problems(cvf.sbs.select_results([RUN], "*int8*", (0, 1)), "deepbench", 0.1, 0.0)
    row = cvf.make_row(problems[0], found)
    assert row.find_layout == "nhwc" and not row.layout_differs and row.fallback


def test_the_loop_runs_under_tf32_off_and_its_output_is_kept(tmp_path: Path, capsys) -> None:
    """A stand-in conv_find (a shell script printing the fixture and its environment's TF32 state on stderr, as
    the loop's header does): conv_vs_find feeds it, sets NVIDIA_TF32_OVERRIDE=0, keeps its output line by line."""
    stand_in = tmp_path / "conv_find"
    stand_in.write_text(
        f'#!/bin/sh\ncat >/dev/null\ngrep -v "^#" {OUTPUT}\necho "# NVIDIA_TF32_OVERRIDE $NVIDIA_TF32_OVERRIDE" >&2\n'
    )
    stand_in.chmod(0o755)
    saved = tmp_path / "saved.txt"
    assert cvf.main([str(RUN), "--bin", str(tmp_path), "--save-output", str(saved)]) == 1
    assert "SUMMARY conv fp32: 3 directions" in capsys.readouterr().out
    kept = saved.read_text().splitlines()
    assert kept[-1] == "# NVIDIA_TF32_OVERRIDE 0"
    assert cvf.parse_output(kept).keys() == cvf.parse_output(OUTPUT.read_text().splitlines()).keys()


def test_rows_at_clocks_apart_are_compared_in_cycles_too() -> None:
    """A sustained loop at a power-capped clock against conv_find's burst at full clock: the time ratio
    counts against the harness, the cycle ratio (time x clock) is the like-with-like one."""
    found = cvf.parse_output(OUTPUT.read_text().splitlines())
    fast = found[FP32_FWD].fastest
    assert fast is not None and fast.best_mhz == 1785  # the clock its `timed` line read
    base = {"precision": "fp16", "harness_engine": "1", "harness_plan": "eng1", "harness_layout": "NHWC", "line": "x"}
    capped = cvf.Row(
        id="a",
        direction="fwd",
        harness_us=57.0,
        ratio=57.0 / 50.0,
        find_us=50.0,
        find_mhz=1980.0,
        harness_mhz=1700.0,
        cycle_ratio=57.0 * 1700.0 / (50.0 * 1980.0),
        **base,
    )
    same = cvf.Row(
        id="b",
        direction="fwd",
        harness_us=40.0,
        ratio=1.0,
        find_us=40.0,
        find_mhz=1980.0,
        harness_mhz=1975.0,
        cycle_ratio=40.0 * 1975.0 / (40.0 * 1980.0),
        **base,
    )
    assert cvf.clocks_differ(capped) and not cvf.clocks_differ(same)
    (s,) = cvf.summarize([capped, same])
    assert (s.within, s.clocks_differ, s.within_cycles, s.above_cycles) == (1, 1, 2, 0)
    assert not s.passed and s.passed_cycles
