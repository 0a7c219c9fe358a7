"""The native side-by-side's CPU side (tests/benchmarks/native_side_by_side.py): the lines it feeds
gemm_loop and conv_loop from result records (padding applied, DeepBench's leading dimensions,
cuDNN engines with knob names turned into cudnn_frontend's numbers), and how it reads the loops'
output back into ratios. No GPU: records are synthetic (tests/reports_synthetic.py) with the
fields the cuBLAS and cuDNN backends write, and the loops' output is written here."""

from __future__ import annotations

import json
import math
import os
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from deepbench.kernels.catalog import by_id
from deepbench.kernels.results import KernelResult, Measurement, PartResult, TimeStats

from .conftest import load_benchmark
from .reports_synthetic import result, write_run

sbs = load_benchmark("native_side_by_side")


def with_parts(
    r,
    infos: dict[str, dict],
    samples_us: float = 100.0,
    n: int = 10,
    calls: int = 50,
    clocks_mhz: tuple[float, ...] = (),
    **update,
):
    """The synthetic result with each direction's info replaced and its samples set to n x samples_us
    (validated again, as a results.jsonl reader would)."""
    parts = []
    for p in r.parts:
        m = Measurement.of(
            [samples_us] * n,
            method="cuda-graph-events",
            calls_per_sample=calls,
            warmup_calls=0,
            stop_reason="converged",
            target_rel_precision=0.01,
            clocks_mhz=clocks_mhz,
        )
        parts.append(
            PartResult(
                direction=p.direction,
                measurement=m,
                flops=p.flops,
                min_bytes=p.min_bytes,
                check=p.check,
                info=infos.get(p.direction, {}),
            )
        )
    total = TimeStats.total(p.measurement.stats for p in parts)
    return KernelResult.model_validate(
        {**r.model_dump(), "parts": [p.model_dump() for p in parts], "time_us": total.model_dump(), **update}
    )


def gemm_result(kid: str, precision: str, call: dict, backend: str = "cublas", **kw):
    r = result(by_id()[kid], precision, lambda d: [1.0])
    return with_parts(r, {"fwd": {"blas_call": call}}, backend=backend, **kw)


def cudnn_info(plan: str, candidates: list[tuple[str, str]]) -> dict:
    """A cuDNN record choosing `plan` among (plan name, status) candidates."""
    return {
        "cudnn": {
            "engine": plan.removeprefix("eng").split("_")[0],
            "plan_name": plan,
            "candidates": [{"plan_name": e, "rank": i, "status": s} for i, (e, s) in enumerate(candidates)],
        }
    }


@pytest.mark.parametrize(
    ("inputs", "deepbench_call", "tail"),
    [
        (None, False, "strict"),  # nothing recorded: gemm_loop's default, normal
        ("zeros", False, "strict 0.000 zeros"),
        ("zeros", True, "strict 0.000 zeros"),
        ("uniform", True, "strict 0.000 uniform"),
    ],
)
def test_gemm_line_draws_what_the_harness_drew_and_can_make_deepbenchs_call(inputs, deepbench_call, tail):
    """The loop draws its operands as the result records (--inputs deepbench: zeros for fp16); with
    --deepbench-call an fp16 GEMM is DeepBench's cublasGemmEx with fp16 accumulate (fp16acc16)."""
    call = {"transa": "N", "transb": "N", "m": 7680, "n": 1, "k": 2560, "lda": 7680, "ldb": 2560, "ldc": 7680}
    r = gemm_result("gemm/inference_server/008", "fp16", call, inputs=inputs)
    (p,) = sbs.build_problems([r], 0.1, deepbench_call=deepbench_call)[0]
    precision = "fp16acc16" if deepbench_call else "fp16"
    assert p.line == f"{precision} N N 7680 1 2560 {sbs.MIN_SECONDS:.3f} {tail}"
    assert p.precision == "fp16"  # the row still names the harness's precision


def test_an_fp16acc16_result_is_gemm_loops_fp16acc16_with_the_recorded_math_mode():
    """A harness fp16acc16 result (DeepBench's half call) maps to gemm_loop's fp16acc16 as it is, in
    the default math mode its handle recorded; --deepbench-call leaves it so."""
    call = {"transa": "N", "transb": "N", "m": 7680, "n": 1, "k": 2560, "lda": 7680, "ldb": 2560, "ldc": 7680}
    info = {"blas_call": call, "math_mode": "CUBLAS_DEFAULT_MATH"}
    r = with_parts(result(by_id()["gemm/inference_server/008"], "fp16acc16", lambda d: [1.0]), {"fwd": info})
    for deepbench_call in (False, True):
        (p,) = sbs.build_problems([r], 0.1, deepbench_call=deepbench_call)[0]
        assert p.line == f"fp16acc16 N N 7680 1 2560 {sbs.MIN_SECONDS:.3f} default"
        assert p.precision == "fp16acc16"


def test_gemm_line_is_the_padded_blas_call_with_the_harness_seconds():
    # DeepBench's fp16 4096x7133x4096 NT, n padded to 7136 (NT pads m and n): lda = m, ldb = n, ldc = m.
    call = {"transa": "N", "transb": "T", "m": 4096, "n": 7136, "k": 4096, "lda": 4096, "ldb": 7136, "ldc": 4096}
    r = gemm_result("gemm/train/043", "fp16", call, padding={"n": 7136})
    problems, notes = sbs.build_problems([r], 0.1)
    assert notes == []
    (p,) = problems
    # 10 samples x 100 us x 50 calls = 0.05 s measured: the native loop runs at least MIN_SECONDS.
    assert p.line == f"fp16 N T 4096 7136 4096 {sbs.MIN_SECONDS:.3f} strict"
    assert p.harness_us == 100.0
    long_ = with_parts(r, {"fwd": {"blas_call": call}}, samples_us=1000.0, n=20, calls=30)
    assert sbs.gemm_problem(long_).line.split()[6] == "0.600"  # 20 x 1000 us x 30 calls
    assert sbs.gemm_problem(long_, max_seconds=0.25).line.split()[6] == "0.250"  # --max-seconds
    assert sbs.build_problems([r], 0.1, min_us=100.5) == ([], [])  # --min-us: a 100 us part is left out


def test_gemm_int8_at_n1_and_math_mode_by_backend():
    call = {"transa": "N", "transb": "N", "m": 7680, "n": 1, "k": 2560, "lda": 7680, "ldb": 2560, "ldc": 7680}
    assert sbs.gemm_problem(gemm_result("gemm/inference_server/008", "int8", call)).line.startswith(
        "int8 N N 7680 1 2560 "
    )
    # The PyTorch backend forbids fp16/bf16 split-K reductions in fp16; gemm_loop is told so.
    assert sbs.gemm_problem(gemm_result("gemm/inference_server/008", "fp16", call, backend="torch")).line.endswith(
        " strict"
    )


@pytest.mark.parametrize(
    "call, why",
    [
        ({"transa": "N", "transb": "N", "m": 64, "n": 1, "k": 1216}, "no lda/ldb/ldc"),
        ({"transa": "T", "transb": "N", "m": 64, "n": 1, "k": 1216, "lda": 64, "ldb": 1216, "ldc": 64}, "differ"),
    ],
)
def test_gemm_records_the_loop_cannot_reproduce_are_skipped_with_a_note(call, why):
    problems, notes = sbs.build_problems([gemm_result("gemm/inference_device/003", "fp32", call)], 0.1)
    assert problems == [] and len(notes) == 1 and why in notes[0]


def test_conv_lines_apply_padding_and_pin_the_plan_by_its_name():
    """The loop is given the plan's name (every knob cuDNN set), never the engine id and the
    frontend's knob list, which can miss a knob (engine 49's split-K) and re-create another plan;
    candidates are known by their names too (two can share an engine id and listed knobs)."""
    # conv/train/017 (c = 3) in fp16: DeepBench padded c to 8; k = 64 already a multiple.
    r = result(by_id()["conv/train/017"], "fp16", lambda d: [1.0])
    infos = {
        "fwd": cudnn_info(
            "eng49_k0=43_k2=5_k5=4_k14=4",
            [
                ("eng7", "passed"),
                ("eng49_k2=5_k5=4", "unchecked"),
                ("eng49_k0=43_k2=5_k5=4_k14=4", "chosen"),
                ("eng61", "rejected"),
            ],
        ),
        "bwd_data": cudnn_info("eng1", [("eng1", "chosen")]),
        "bwd_filter": cudnn_info("eng12_k12=7", [("eng12_k12=7", "chosen")]),
    }
    r = with_parts(r, infos, padding={"c": 8})
    problems, notes = sbs.build_problems([r], 0.25)
    assert notes == []
    fwd, bwd_data, bwd_filter = problems
    shape = "8 8 224 224 64 3 3 1 1 1 1"  # n c h w k r s pad_h pad_w stride_h stride_w, c padded
    assert fwd.line == f"fp16 fwd {shape} eng49_k0=43_k2=5_k5=4_k14=4 {sbs.MIN_SECONDS:.3f}"
    assert fwd.candidates_line == f"fp16 fwd {shape} - 0.250"
    statuses = {e: fwd.status(e) for e in fwd.candidates}
    assert statuses == {
        "eng7": "passed",
        "eng49_k2=5_k5=4": "unchecked",
        "eng49_k0=43_k2=5_k5=4_k14=4": "chosen",
        "eng61": "rejected",
    }
    assert fwd.status("eng99") == sbs.NOT_LISTED
    assert bwd_data.line.split()[13] == "eng1" and bwd_filter.line.split()[13] == "eng12_k12=7"
    for p in problems:
        assert len(p.line.split()) == len(p.candidates_line.split()) == sbs.CONV_FIELDS
    # --candidate-seconds 0 leaves the candidate pass out
    assert all(p.candidates_line == "" for p in sbs.build_problems([r], 0.0)[0])


def test_find_first_runs_every_directions_candidates_before_its_pinned_plan():
    """--find-first feeds conv_loop in DeepBench's conv_bench order and the harness's (cudnnFind's trial
    of every algorithm / the engine race, then the timed loop), per direction in the run's order; a
    direction under --min-us runs its candidates (the harness raced them) but is neither pinned nor
    compared."""
    r = result(by_id()["conv/train/017"], "fp16", lambda d: [1.0])
    infos = {
        d: cudnn_info(f"eng{i}_k2=1", [(f"eng{i}_k2=1", "chosen")])
        for i, d in enumerate(("fwd", "bwd_data", "bwd_filter"))
    }
    short = with_parts(r, infos, samples_us=10.0, padding={"c": 8})
    long_ = with_parts(r, infos, samples_us=40.0, padding={"c": 8})
    problems, _ = sbs.build_problems([long_], 0.01, min_us=20.0, find_first=True)
    _, conv = sbs.loop_inputs(problems, find_first=True)
    shape = "8 8 224 224 64 3 3 1 1 1 1"
    assert conv == [
        f"fp16 fwd {shape} - 0.010",
        f"fp16 fwd {shape} eng0_k2=1 {sbs.MIN_SECONDS:.3f}",
        f"fp16 bwd_data {shape} - 0.010",
        f"fp16 bwd_data {shape} eng1_k2=1 {sbs.MIN_SECONDS:.3f}",
        f"fp16 bwd_filter {shape} - 0.010",
        f"fp16 bwd_filter {shape} eng2_k2=1 {sbs.MIN_SECONDS:.3f}",
    ]
    problems, _ = sbs.build_problems([short], 0.01, min_us=20.0, find_first=True)
    assert [p.compared for p in problems] == [False] * 3
    assert sbs.loop_inputs(problems, find_first=True)[1] == conv[::2]  # candidates only
    # without it: the pinned plan first, and short directions left out
    problems, _ = sbs.build_problems([short, long_], 0.01, min_us=20.0)
    assert len(problems) == 3 and sbs.loop_inputs(problems)[1][:2] == [conv[1], conv[0]]


def test_int8_conv_pads_channels_and_height():
    # conv/inference_server/000: c = 1, h = 161, w = 700 -> int8: c 32, h 164 (w already a multiple of 4).
    r = result(by_id()["conv/inference_server/000"], "int8", lambda d: [1.0])
    r = with_parts(r, {"fwd": cudnn_info("eng71", [("eng71", "chosen")])}, padding={"c": 32, "h": 164})
    line = sbs.build_problems([r], 0.1)[0][0].line
    assert line.startswith("int8 fwd 1 32 164 700 32 5 20 0 0 2 2 eng71 ")


def test_conv_without_a_plan_name_is_skipped_with_a_note():
    kernel = by_id()["conv/train/017"]
    plain = result(kernel, "fp32", lambda d: [1.0])  # a PyTorch-backend record: no info.cudnn
    odd = with_parts(plain, {d: cudnn_info("9:TILE_SIZE=1", []) for d in kernel.DIRECTIONS})
    problems, notes = sbs.build_problems([plain, odd], 0.1)
    assert problems == []
    assert sum("no cuDNN plan name" in n for n in notes) == 6


def conv_problem() -> sbs.Problem:
    """conv/train/017 in fp16, its forward direction (the only one with a cuDNN record)."""
    r = result(by_id()["conv/train/017"], "fp16", lambda d: [1.0])
    infos = {
        "fwd": cudnn_info(
            "eng34_k2=1", [("eng7", "rejected"), ("eng34_k2=1", "chosen"), ("eng12", "unchecked"), ("eng40", "passed")]
        )
    }
    r = with_parts(r, infos, samples_us=50.0, padding={"c": 8})
    return sbs.build_problems([r], 0.1)[0][0]


def test_conv_rows_compare_with_the_better_native_figure_and_the_fastest_unrejected_candidate():
    p = conv_problem()
    prefix = " ".join(p.candidates_line.split())
    out = [
        f"{p.line} 34 2=1 eng34_k2=1 48.0000 47.5000",  # the pinned engine: graph better
        f"{prefix} 7 - eng7 30.0000 29.0000",  # fastest, but the harness rejected it
        f"{prefix} 34 2=1 eng34_k2=1 48.0000 nan",  # chosen: graph not capturable -> host loop
        f"{prefix} 12 - eng12 error execute: CUDNN_STATUS_EXECUTION_FAILED",
        f"{prefix} 40 - eng40 46.0000 47.0000",  # fastest the harness did not reject
    ]
    row = sbs.make_row(p, {}, sbs.parse_conv_output(out))
    assert row["native_us"] == 48.0 and row["native_graph_us"] == 47.5 and row["native_best_us"] == 47.5
    assert row["ratio"] == pytest.approx(50.0 / 47.5)
    assert row["fastest_engine"] == "eng40" and row["fastest_status"] == "passed"
    assert row["chosen_over_fastest"] == pytest.approx(48.0 / 46.0)
    assert row["candidates_native"] == 4 and row["candidates_common"] == 4
    assert [c["engine"] for c in row["candidates"]] == ["7 -", "34 2=1", "12 -", "40 -"]
    assert [c["plan"] for c in row["candidates"]] == ["eng7", "eng34_k2=1", "eng12", "eng40"]


def test_conv_problem_errors_are_rows_without_a_ratio():
    p = conv_problem()
    out = [f"{p.line} error cuDNN offers no engine for this convolution"]
    row = sbs.make_row(p, {}, sbs.parse_conv_output(out))
    assert "ratio" not in row and row["error"] == "cuDNN offers no engine for this convolution"
    assert row["choice_error"] == "no output for the candidates"


def test_gemm_output_by_order_with_errors():
    inputs = ["int8 N N 4 1 64 0.200 default", "fp16 N T 8 8 8 0.200 default"]
    out = ["int8 N N 4 1 64 error cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED", "fp16 N T 8 8 8 3.5000 600 3.1000"]
    parsed = sbs.parse_gemm_output(out, inputs)
    assert parsed[inputs[0]] == {"error": "cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED"}
    assert parsed[inputs[1]] == {"native_us": 3.5, "calls": 600, "native_graph_us": 3.1}
    assert sbs.best(3.5, math.nan) == 3.5


def test_clocks_turn_a_ratio_into_cycles_and_older_loops_still_parse(capsys):
    call = {"transa": "N", "transb": "N", "m": 512, "n": 6000, "k": 2816, "lda": 512, "ldb": 2816, "ldc": 512}
    r = gemm_result("gemm/inference_server/065", "fp16", call, clocks_mhz=(1500.0, 1470.0, 1470.0))
    (p,) = sbs.build_problems([r], 0.1)[0]
    assert p.harness_mhz == 1470.0  # the median reading beside the harness's samples

    def row_for(figures: str) -> dict:
        """The row for gemm_loop's answer `figures` (after the echoed problem)."""
        out = f"{' '.join(p.line.split()[:6])} {figures}"
        return sbs.make_row(p, sbs.parse_gemm_output([out], [p.line]), {})

    row = row_for("110.0000 20 105.0000 1400 1400")  # the graph is the better way: its clock counts
    assert (row["ratio"], row["native_best_mhz"]) == (pytest.approx(100.0 / 105.0), 1400.0)
    assert row["cycle_ratio"] == pytest.approx(100.0 * 1470.0 / (105.0 * 1400.0))
    assert row_for("104.0000 20 105.0000 1480 nan")["native_best_mhz"] == 1480.0  # the host loop's
    for no_clock in ("104.0000 20 105.0000 nan nan", "104.0000 20 105.0000"):  # no NVML; a loop built before
        assert "cycle_ratio" not in row_for(no_clock)
    summaries, _ = sbs.summarize([row])
    assert (summaries[0]["cycles_compared"], summaries[0]["cycles_within"]) == (1, 1)
    assert "CLOCKS gemm fp16: 1 parts with both clocks, 1 timed at clocks more than 2% apart" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("span_s", "info", "rest_s"),
    [
        (0.3, {"clock_settle": {"seconds": 0.05}}, 0.2),  # 0.3 s less 0.05 s measured, less 0.05 s settling
        (31.0, {"device_warm_up": {"seconds": 30.9}}, 0.05),  # the first kernel's warm-up kept the GPU busy
        (0.04, {}, 0.0),  # never below zero
        (9.0, {}, sbs.MAX_REST_S),  # nor above the cap
    ],
)
def test_rest_as_harness_is_the_kernels_time_outside_its_measurement(span_s, info, rest_s):
    call = {"transa": "N", "transb": "N", "m": 512, "n": 6000, "k": 2048, "lda": 512, "ldb": 2048, "ldc": 512}
    r = gemm_result("gemm/inference_server/066", "fp16", call)  # 10 samples x 100 us x 50 calls: 0.05 s
    r = with_parts(r, {"fwd": {"blas_call": call, **info}}, ended_at=r.started_at + timedelta(seconds=span_s))
    assert sbs.harness_rest(r) == pytest.approx(rest_s)
    assert sbs.gemm_problem(r, rest_as_harness=True).line.endswith(f" strict {sbs.harness_rest(r):.3f}")
    assert sbs.gemm_problem(r).line.endswith(" strict")  # no pause unless asked


def test_summary_counts_against_issue_20s_bounds(capsys):
    rows = [{"op": "gemm", "precision": "fp16", "harness_us": 100.0, "ratio": x} for x in (1.0, 1.04, 0.96, 1.3)]
    rows += [{"op": "gemm", "precision": "fp16", "harness_us": 5.0, "ratio": 2.0}]  # under MIN_US: not counted
    rows += [
        {"op": "conv", "precision": "int8", "harness_us": 30.0, "ratio": 1.0, "chosen_over_fastest": x}
        for x in (1.0, 1.08)
    ]
    summaries, ok = sbs.summarize(rows)
    gemm = next(s for s in summaries if s["op"] == "gemm")
    assert (gemm["compared"], gemm["within"], gemm["outside"], gemm["max"]) == (4, 3, 1, 1.3)
    conv = next(s for s in summaries if s["op"] == "conv")
    assert (conv["choice_compared"], conv["choice_within"]) == (2, 1)
    assert not ok
    assert "SUMMARY conv int8 choice: 1 of 2" in capsys.readouterr().out


def test_dry_run_prints_the_loops_input_without_a_gpu(tmp_path, capsys):
    call = {"transa": "N", "transb": "T", "m": 4096, "n": 7136, "k": 4096, "lda": 4096, "ldb": 7136, "ldc": 4096}
    conv = with_parts(
        result(by_id()["conv/train/017"], "fp16", lambda d: [1.0]),
        {d: cudnn_info("eng34_k2=1", [("eng34_k2=1", "chosen")]) for d in ("fwd", "bwd_data", "bwd_filter")},
        padding={"c": 8},
    )
    folder = write_run(tmp_path / "run", [gemm_result("gemm/train/043", "fp16", call, padding={"n": 7136}), conv])
    assert sbs.main([str(folder), "--dry-run", "--bin", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "fp16 N T 4096 7136 4096 0.200 strict" in out
    assert "# conv_loop stdin (6 lines)" in out  # three directions, each pinned and with its candidates


def test_usage_errors_exit_2(tmp_path, capsys):
    assert sbs.main([]) == 2
    assert sbs.main([str(tmp_path)]) == 2
    assert "no results.jsonl" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert sbs.main(["--merge", str(bad)]) == 2
    assert sbs.main(["--merge", str(tmp_path / "absent.json")]) == 2
    assert sbs.main([str(tmp_path), "--find-first", "--candidate-seconds", "0"]) == 2
    assert "--find-first runs the candidates" in capsys.readouterr().err


FAKE_GEMM = """import sys
print("# cublas 13.0.2", file=sys.stderr)
for line in sys.stdin:
    f = line.split()
    print(" ".join(f[:6]), "25.0000 80 24.0000", flush=True)
"""
FAKE_GEMM_GRAPH_FIRST = """import os, sys
print("# cublas 13.0.2", file=sys.stderr)
graph_us = "12.0000" if os.environ.get("LOOP_GRAPH_FIRST") else "24.0000"
for line in sys.stdin:
    print(" ".join(line.split()[:6]), "25.0000 80", graph_us, flush=True)
"""
FAKE_CONV = """import sys
print("# cudnn 91900", file=sys.stderr)
for line in sys.stdin:
    f = line.split()
    head = " ".join(f[:15])
    if f[13] == "-":
        print(head, "7 - eng7 18.0000 17.0000")
        print(head, "34 2=1 eng34_k2=1 20.0000 19.0000")
    else:
        print(head, "34 2=1 eng34_k2=1 21.0000 20.0000", flush=True)
"""


def fake_loops(folder: Path, gemm: str = FAKE_GEMM) -> Path:
    """Stand-ins for the built loops that answer in their output format (the plumbing, not the timing)."""
    folder.mkdir()
    for name, body in (("gemm_loop", gemm), ("conv_loop", FAKE_CONV)):
        path = folder / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)
    return folder


def test_a_run_reads_the_loops_and_writes_rows_that_merge(tmp_path, capsys, monkeypatch):
    call = {"transa": "N", "transb": "T", "m": 4096, "n": 7136, "k": 4096, "lda": 4096, "ldb": 7136, "ldc": 4096}
    conv = with_parts(
        result(by_id()["conv/train/017"], "fp16", lambda d: [1.0]),
        {"fwd": cudnn_info("eng34_k2=1", [("eng7", "unchecked"), ("eng34_k2=1", "chosen")])},
        samples_us=40.0,
        padding={"c": 8},
    )
    gemm = gemm_result("gemm/train/043", "fp16", call, padding={"n": 7136})
    folder = write_run(tmp_path / "run", [gemm, conv])
    out_json = tmp_path / "rows.json"
    code = sbs.main(
        [str(folder), "--bin", str(fake_loops(tmp_path / "bin")), "--json", str(out_json), "--warm-up", "1"]
    )
    data = json.loads(out_json.read_text())
    assert data["versions"] == {"cublas": "13.0.2", "cudnn": "91900"}
    gemm_row, conv_row = data["rows"]
    assert gemm_row["ratio"] == pytest.approx(100.0 / 24.0)  # harness 100 us, native graph 24 us
    assert conv_row["ratio"] == pytest.approx(40.0 / 20.0) and conv_row["plan_name"] == "eng34_k2=1"
    assert conv_row["fastest_engine"] == "eng7" and conv_row["chosen_over_fastest"] == pytest.approx(19.0 / 17.0)
    assert len(data["skipped"]) == 2  # bwd_data and bwd_filter have no cuDNN record
    assert code == 1  # 4x and 2x the native time: the targets fail, as they must
    assert "SUMMARY gemm fp16: 1 parts" in capsys.readouterr().out
    merged = tmp_path / "merged.json"
    assert sbs.main(["--merge", str(out_json), str(out_json), "--json", str(merged)]) == 1
    assert "SUMMARY conv fp16 choice: 0 of 2 chosen engines" in capsys.readouterr().out
    both = json.loads(merged.read_text())
    assert both["rows"] == data["rows"] * 2 and both["shards"] == [str(out_json)] * 2
    assert both["folders"] == data["folders"] and len(both["skipped"]) == 4
    assert [s["choice_compared"] for s in both["summary"] if s["op"] == "conv"] == [2]


def test_graph_first_reaches_the_loops_environment_and_no_further(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOP_GRAPH_FIRST", raising=False)
    call = {"transa": "N", "transb": "T", "m": 4096, "n": 7136, "k": 4096, "lda": 4096, "ldb": 7136, "ldc": 4096}
    folder = write_run(tmp_path / "run", [gemm_result("gemm/train/043", "fp16", call, padding={"n": 7136})])
    bin_dir = fake_loops(tmp_path / "bin", FAKE_GEMM_GRAPH_FIRST)
    ratios = []
    for extra in ([], ["--graph-first"]):
        out = tmp_path / f"rows{len(extra)}.json"
        sbs.main([str(folder), "--bin", str(bin_dir), "--json", str(out), "--warm-up", "0", *extra])
        ratios.append(json.loads(out.read_text())["rows"][0]["ratio"])
    assert ratios == [pytest.approx(100.0 / 24.0), pytest.approx(100.0 / 12.0)]
    assert "LOOP_GRAPH_FIRST" not in os.environ  # the loops' environment only, not this process's


def test_conv_lines_carry_the_layout_the_result_records_and_outputs_still_match():
    """conv_loop's optional LAYOUT is the layout the harness's part recorded (info.layout: NHWC for
    fp16 by default, DeepBench's), never the loop's own guess; its output echoes the 15 fields before
    it, by which the rows find their lines."""
    r = result(by_id()["conv/train/017"], "fp16", lambda d: [1.0])
    infos = {
        d: {**cudnn_info("eng1", [("eng1", "chosen")]), "layout": "NHWC"} for d in ("fwd", "bwd_data", "bwd_filter")
    }
    p = sbs.build_problems([with_parts(r, infos, padding={"c": 8})], 0.25)[0][0]
    assert p.line.split()[-1] == "nhwc" and p.candidates_line.split()[-1] == "nhwc"
    assert len(p.line.split()) == sbs.CONV_FIELDS + 1
    out = [
        f"{sbs.echoed(p.line)} 1 - eng1 40.0000 39.0000",
        f"{sbs.echoed(p.candidates_line)} 1 - eng1 40.0000 39.0000",
    ]
    row = sbs.make_row(p, {}, sbs.parse_conv_output(out))
    assert row["native_best_us"] == 39.0 and "error" not in row
