"""tests/benchmarks/interleaved.py without a GPU: the harness's settings it re-measures with, a loop's library
run with files for stdin and stdout, turns that alternate which side goes first, the CUPTI trace's kernel
figures, the 20-us cut on the recorded figure, and usage errors."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from deepbench.kernels.catalog import by_id
from deepbench.kernels.results import PLAN_FILE, Plan, Settings

from .conftest import load_benchmark
from .reports_synthetic import result, write_run
from .test_native_side_by_side import cudnn_info, gemm_result, sbs, with_parts

ll = load_benchmark("loop_library")
ci = load_benchmark("interleaved")

PLAN = "eng34_k2=1"


def conv_run(folder: Path, kernel_time: bool = True) -> Path:
    """A run folder with one fp16 convolution whose fwd recorded PLAN, and its plan.json."""
    conv = with_parts(
        result(by_id()["conv/train/017"], "fp16", lambda d: [1.0]),
        {"fwd": cudnn_info(PLAN, [(PLAN, "chosen")])},
        samples_us=40.0,
        padding={"c": 8},
    )
    write_run(folder, [conv])
    plan = Plan(
        run_id="r",
        suite="train",
        platform="nvidia",
        backend="nvidia",
        settings=Settings(kernel_time=kernel_time, warm_up_s=30.0),
        items=(),
    )
    (folder / PLAN_FILE).write_text(plan.model_dump_json())
    return folder


def test_the_harness_re_measures_with_the_runs_settings_and_its_recorded_plans(tmp_path):
    folder = conv_run(tmp_path / "run")
    results = sbs.select_results([folder], None, (0, 1))
    settings = ci.harness_settings(folder, results, 5.0, kernel_time=True)
    assert settings.backend_options["cudnn"]["engines"] == {"conv/train/017/fp16/fwd": PLAN}
    assert settings.kernel_time and settings.warm_up_s == 5.0
    assert not ci.harness_settings(folder, results, 5.0, kernel_time=False).kernel_time
    off = conv_run(tmp_path / "off", kernel_time=False)
    assert not ci.harness_settings(off, sbs.select_results([off], None, (0, 1)), 5.0, kernel_time=True).kernel_time


def test_conv_loop_reads_a_file_and_writes_one_and_the_descriptors_come_back(tmp_path):
    loop = ll.LoopLibrary.__new__(ll.LoopLibrary)  # the library's entry point replaced by one that echoes stdin

    def echo() -> int:
        data = b""
        while chunk := os.read(0, 4096):
            data += chunk
        os.write(1, b"".join(line + b" 1 x eng1 10.0 9.0\n" for line in data.splitlines()))
        return 0

    loop.run_stdin = echo
    before = os.fstat(0).st_ino, os.fstat(1).st_ino
    assert loop.run(["a b", "c d"]) == ["a b 1 x eng1 10.0 9.0", "c d 1 x eng1 10.0 9.0"]
    assert loop.run(["e"]) == ["e 1 x eng1 10.0 9.0"]  # a second call reads its own file from the start
    assert (os.fstat(0).st_ino, os.fstat(1).st_ino) == before


def test_the_20_us_cut_is_on_the_recorded_figure(capsys):
    rows = [
        {"op": "conv", "precision": "fp16", "recorded_us": 21.0, "harness_us": 19.0, "ratio": 1.0},
        {"op": "conv", "precision": "fp16", "recorded_us": 19.0, "harness_us": 21.0, "ratio": 2.0},
    ]
    summaries, ok = sbs.summarize(rows)
    assert summaries[0]["compared"] == 1 and ok
    assert "SUMMARY conv fp16: 1 parts" in capsys.readouterr().out


def test_usage_errors_exit_2(tmp_path, capsys):
    folder = conv_run(tmp_path / "run")
    results = sbs.select_results([folder], None, (0, 1))
    before = sbs.build_problems(results, 0.1)
    missing = str(tmp_path / "none.so")
    assert ci.main([str(folder), "--conv-library", missing, "--min-us", "7", "--max-seconds", "0.01"]) == 2
    assert sbs.build_problems(results, 0.1) == before  # its --min-us and --max-seconds stay its own
    assert "build the native loops first" in capsys.readouterr().err
    assert ci.main([str(folder), "--rounds", "0"]) == 2
    assert "--rounds must be 1 or more" in capsys.readouterr().err
    assert ci.main([str(tmp_path / "nothing")]) == 2
    assert "not a deepbench-run results folder" in capsys.readouterr().err


CALL_065 = {"transa": "N", "transb": "N", "m": 512, "n": 6000, "k": 2816, "lda": 512, "ldb": 2816, "ldc": 512}


def test_turns_alternate_which_side_goes_first_and_rows_take_both_sides_medians(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "run"
    write_run(folder, [gemm_result("gemm/inference_server/065", "fp16", CALL_065, samples_us=30.0)])
    plan = Plan(
        run_id="r",
        suite="inference-server",
        platform="nvidia",
        backend="nvidia",
        settings=Settings(kernel_time=False),
        items=(),
    )
    (folder / PLAN_FILE).write_text(plan.model_dump_json())
    order: list[str] = []
    harness = iter([(30.0, 1500.0), (31.0, 1450.0), (29.0, 1520.0)])
    native = iter(["32.0 50 30.0 1400 1410", "33.0 50 31.0 1390 1400", "31.0 50 29.0 1420 1430"])

    def harness_figures(backend, r, settings):
        order.append("harness")
        return {"fwd": next(harness)}

    class Loop:
        def __init__(self, op, path):
            assert op == "gemm"

        def run(self, lines):
            order.append("native")
            return [f"{' '.join(line.split()[:6])} {next(native)}" for line in lines]

    monkeypatch.setattr(ci, "harness_figures", harness_figures)
    monkeypatch.setattr(ci, "LoopLibrary", Loop)
    monkeypatch.setattr("deepbench.kernels.backends.load_backend", lambda name, settings: name)
    assert ci.main([str(folder), "--rounds", "3", "--json", str(tmp_path / "out.json")]) == 0
    assert order == ["harness", "native", "native", "harness", "harness", "native"]
    (row,) = json.loads((tmp_path / "out.json").read_text())["rows"]
    assert (row["harness_us"], row["native_best_us"], row["ratio"]) == (30.0, 30.0, 1.0)
    assert (row["harness_mhz"], row["native_best_mhz"]) == (1500.0, 1410.0)  # the graph's clock: its time was best
    assert row["cycle_ratio"] == pytest.approx(1500.0 / 1410.0)
    out = capsys.readouterr().out
    assert "SUMMARY gemm fp16: 1 parts >= 20 us compared" in out and "PASS" in out


def test_the_trace_names_the_commonest_kernel_with_its_duration_and_back_to_back_gaps():
    gemm = [(10.0 * i, 10.0 * i + 9.0, "nvjet_hsh_256x128") for i in range(5)]  # 1-us gaps
    gemm.append((200.0, 209.0, "nvjet_hsh_256x128"))  # after a 141-us pause: not back to back
    events = sorted([*gemm, (100.0, 101.0, "gemv"), (300.0, 301.0, "gemv")])
    assert ci.kernel_trace(events) == {"kernel": "nvjet_hsh_256x128", "runs": 6, "kernel_us": 9.0, "gap_us": 1.0}
    assert ci.kernel_trace([]) == {}
    assert math.isnan(ci.kernel_trace([(0.0, 9.0, "k")])["gap_us"])  # one run: no gap to read
