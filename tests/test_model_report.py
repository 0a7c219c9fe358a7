"""OpBench's operator-level report (issue 9): throughput per operator type against the device's
measured peaks, and two devices compared per operator type against their peak FLOPS ratio.

The arithmetic is checked on small synthetic result lists (tests/reports_synthetic.py: real
records, known times); the commands on real runs: CPU runs written by deepbench-run here (two
thread counts as the two 'devices') and the committed H200 runs (runner/published/nvidia-h200)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepbench.kernels.catalog import GemmKernel
from deepbench.kernels.layers import ActivationKernel
from deepbench.kernels.model_kernel import MODEL_OP as WHOLE_MODEL_OP
from deepbench.kernels.model_kernel import ModelKernel
from deepbench.kernels.noise import usable_cpus
from deepbench.kernels.results import KernelResult, Status
from deepbench.kernels.results_file import read_results
from deepbench.runner.analysis.model_compare import (
    DEPARTS,
    REVERSED,
    compare_results,
    compare_runs,
    departures,
    kernel_key,
)
from deepbench.runner.analysis.model_report import load_model_run, model_reports
from deepbench.runner.cli import main

from .conftest import REPO, run_cli
from .reports_synthetic import result, write_run

H200 = REPO / "runner" / "published" / "nvidia-h200"
# Distinct operators of ResNet-50 at batch 32 per precision: 44 GEMM/conv/layer shapes and 4 residual adds.
H200_RESNET_OPERATORS = 48
H200_RESNET = H200 / "model-resnet50-b32"
H200_BERT = H200 / "model-bert-base-b32"
CPU_RUN = ("deepbench-run", "--local", "--suite", "model:resnet50", "--fast", "--time-cap", "0.05", "--quiet")


# ----- synthetic: the arithmetic ---------------------------------------------------------------
def gemm(index: int, m: int, count: int) -> GemmKernel:
    return GemmKernel(set="model", index=index, application="toy", count=count, m=m, n=64, k=512, a_t=False, b_t=False)


def relu(index: int, elements: int, count: int) -> ActivationKernel:
    return ActivationKernel(
        set="model", index=index, application="toy", count=count, function="relu", elements=elements
    )


def fixed(us: float):
    return lambda direction: [us, us, us]


def toy_results(scale: dict[str, float]) -> list[KernelResult]:
    """Two GEMMs and a ReLU; each type's per-call time scaled by scale[op]."""
    return [
        result(gemm(0, 1024, 2), "fp32", fixed(100.0 * scale["gemm"])),
        result(gemm(1, 2048, 1), "fp32", fixed(150.0 * scale["gemm"])),
        result(relu(0, 1 << 20, 3), "fp32", fixed(40.0 * scale["activation"])),
    ]


def test_departures_flag_reversed_ranking_and_far_ratios() -> None:
    assert departures(3.0, 2.0) == []  # 1.5x off the FLOPS ratio, same ranking: as the peaks say
    assert departures(1.5, None) == []  # no ratio (a run without ceilings): no judgement
    (far,) = departures(5.0, 2.0)
    assert far.startswith(DEPARTS) and "2.5x above" in far
    reversed_, below = departures(0.5, 2.0)  # B has 2x the FLOPS yet is 2x slower: 4x below
    assert reversed_.startswith(REVERSED) and "A is faster" in reversed_
    assert below.startswith(DEPARTS) and "4x below" in below
    (rev,) = departures(1.2, 0.8)  # B is faster with fewer FLOPS, but within the factor
    assert rev.startswith(REVERSED) and "B is faster" in rev
    strict = departures(1.2, 0.8, factor=1.4)  # 1.5x off the ratio: beyond a factor of 1.4
    assert len(strict) == 2 and strict[0] == rev and strict[1].startswith(DEPARTS) and "1.5x above" in strict[1]
    assert departures(1.0, 2.0) == []  # a tie is no reversal; exactly the factor away is not beyond it


def test_report_throughput_against_measured_peaks() -> None:
    results = toy_results({"gemm": 1.0, "activation": 1.0})
    ceilings = {"tflops_fp32": 20.0, "gbps_copy": 2000.0}  # ridge at 10 FLOP/byte: the GEMMs (>= 28) are compute-bound
    (rep,) = model_reports(results, ceilings=ceilings, device="toy device")
    shares = {t.op: t for t in rep.types}
    g, a = shares["gemm"], shares["activation"]
    g_flops = 2 * 2 * 1024 * 64 * 512 + 2 * 2048 * 64 * 512  # calls x 2mnk
    assert g.flops == pytest.approx(g_flops) and g.time_us == pytest.approx(2 * 100 + 150)
    assert g.pct_peak_flops == pytest.approx(100 * g_flops / 350e-6 / 20e12)
    a_bytes = 3 * 2 * (1 << 20) * 4  # calls x (read + write) x fp32
    assert a.pct_peak_bandwidth == pytest.approx(100 * a_bytes / 120e-6 / 2000e9)
    assert a.pct_peak_flops is None  # no FLOPs: a memory-bound type's figure is its bandwidth
    # the roofline bound comes from the ceilings when the parts carry none
    assert g.bound == "compute" and g.pct_of_roof == pytest.approx(g.pct_peak_flops)
    assert a.bound == "memory" and a.pct_of_roof == pytest.approx(a.pct_peak_bandwidth)
    assert rep.peaks_note == "" and rep.device == "toy device"
    as_dict = rep.as_dict()["types"][0]
    assert {"pct_peak_flops", "pct_peak_bandwidth", "bound", "pct_of_roof"} <= as_dict.keys()
    # a run without ceilings (one made before CPU runs measured theirs) has no percentage, and says why
    (bare,) = model_reports(results)
    assert all(t.pct_peak_flops is None and t.pct_peak_bandwidth is None and t.bound is None for t in bare.types)
    assert "no measured ceilings" in bare.peaks_note
    (half,) = model_reports(results, ceilings={"gbps_copy": 500.0})
    assert "tflops_fp32" in half.peaks_note and {t.op: t for t in half.types}["activation"].pct_peak_bandwidth


def test_carried_roofline_wins_and_whole_model_rows_are_no_type() -> None:
    base = result(gemm(0, 1024, 2), "fp32", fixed(100.0))
    part = base.parts[0]
    carried = part.model_copy(update={"info": {"roofline": {"bound": "memory", "bound_us": 25.0, "pct_of_peak": 25.0}}})
    r = base.model_copy(update={"parts": (carried,)})
    whole = result(
        ModelKernel(
            set="model", index=0, application="toy", count=1, model="toy", batch=1, parameters=1000, fwd_flops=10**9
        ),
        "fp32",
        fixed(500.0),
    )  # the whole-model row
    assert whole.kernel.op == WHOLE_MODEL_OP
    (rep,) = model_reports([r, whole], ceilings={"tflops_fp32": 1000.0, "gbps_copy": 1000.0})
    (t,) = rep.types
    assert t.op == "gemm" and t.bound == "memory" and t.pct_of_roof == pytest.approx(25.0)
    (pc,) = compare_results([r, whole], [r], {}, {})
    assert [tc.op for tc in pc.types] == ["gemm"] and not pc.only_a and not pc.only_b


def test_compare_speedups_ratios_and_flags_synthetic() -> None:
    a = toy_results({"gemm": 1.0, "activation": 1.0})
    # B: GEMMs 4x faster (as its 4x FLOPS say), ReLU 1.5x slower (its bandwidth is lower)
    b = toy_results({"gemm": 0.25, "activation": 1.5})[::-1]  # order does not matter: matched by parameters
    b.append(result(gemm(2, 4096, 1), "fp32", fixed(10.0)))  # a kernel only B ran
    (pc,) = compare_results(a, b, {"tflops_fp32": 10.0, "gbps_copy": 1000.0}, {"tflops_fp32": 40.0, "gbps_copy": 800.0})
    assert pc.flops_ratio == pytest.approx(4.0) and pc.bandwidth_ratio == pytest.approx(0.8) and pc.ratio_note == ""
    types = {t.op: t for t in pc.types}
    assert types["gemm"].time_a_us == pytest.approx(350.0) and types["gemm"].speedup == pytest.approx(4.0)
    assert types["gemm"].flags == [] and types["gemm"].kernels == 2
    assert types["activation"].speedup == pytest.approx(1 / 1.5)
    flags = types["activation"].flags
    assert len(flags) == 2 and flags[0].startswith(REVERSED) and flags[1].startswith(DEPARTS)
    assert pc.only_b == ["gemm/model/002/fp32"] and pc.only_a == []
    assert pc.speedup == pytest.approx((350 + 120) / (350 / 4 + 120 * 1.5))
    # without ceilings on one side: no ratio, no flag, and the note says which run lacks them
    (bare,) = compare_results(a, b, {}, {"tflops_fp32": 40.0, "gbps_copy": 800.0})
    assert bare.flops_ratio is None and all(not t.flags for t in bare.types) and bare.ratio_note.startswith("A:")
    # a kernel B could not run is named with B's reason
    failed = KernelResult(
        id="gemm/model/001/fp32",
        kernel=gemm(1, 2048, 1),
        precision=a[1].precision,
        backend="x",
        status=Status.UNSUPPORTED,
        reason="no such engine",
        started_at=a[1].started_at,
        ended_at=a[1].ended_at,
    )
    (pc2,) = compare_results(a, [b[0], b[2], failed], {}, {})
    assert pc2.only_a == ["gemm/model/001/fp32 (unsupported in B: no such engine)"]
    assert pc2.only_b == ["gemm/model/001/fp32 (ok in A)"]


def test_compare_command_on_synthetic_folders(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = write_run(
        tmp_path / "a",
        toy_results({"gemm": 1.0, "activation": 1.0}),
        suite="model:toy",
        ceilings={"tflops_fp32": 10.0, "gbps_copy": 1000.0},
    )
    b = write_run(
        tmp_path / "b",
        toy_results({"gemm": 0.25, "activation": 1.5}),
        suite="model:toy",
        ceilings={"tflops_fp32": 40.0, "gbps_copy": 800.0},
    )
    assert main(["models", "compare", str(a), str(b), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (pd,) = data["precisions"]
    gemm_row = next(t for t in pd["types"] if t["op"] == "gemm")
    assert gemm_row["speedup"] == pytest.approx(4.0) and gemm_row["vs_flops_ratio"] == pytest.approx(1.0)
    assert main(["models", "compare", str(a), str(b)]) == 0
    shown = capsys.readouterr().out
    assert "ranking reversed" in shown and "peak FLOPS ratio B/A 4x" in shown
    assert main(["models", "compare", str(a), str(b), "--factor", "10"]) == 0  # ReLU is 6x below the ratio
    shown = capsys.readouterr().out
    assert "ranking reversed" in shown and "departs" not in shown and "than 10x above" in shown
    assert main(["models", "compare", str(a), str(b), "--factor", "1"]) == 2
    assert "--factor" in capsys.readouterr().err


# ----- real runs on this CPU -------------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """resnet50 at batch 1 on all threads (with the whole-model row) and on one thread (one conv
    fewer: a kernel only A has), and at batch 32 for the comparison with the committed H200 run
    (a few kernels only)."""
    root = tmp_path_factory.mktemp("model-runs")
    # "All threads" named, not left to the default, which leaves out the cores other processes keep busy.
    runs = {
        "a": (["--batch", "1", "--ops", "conv,gemm,model", "--limit", "4", "--threads", str(len(usable_cpus()))]),
        "b": (["--batch", "1", "--ops", "conv,gemm", "--limit", "3", "--threads", "1"]),
        "b32": (["--batch", "32", "--ops", "gemm,activation,batch_norm", "--limit", "1"]),
    }
    for name, args in runs.items():
        proc = run_cli(*CPU_RUN, *args, "--out", str(root / name))
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {name: root / name for name in runs}


def fwd_time_per_op(path: Path, keys: set | None = None) -> dict[str, float]:
    """Each operation's forward time weighted by calls, straight from results.jsonl."""
    out: dict[str, float] = {}
    for r in read_results(path / "results.jsonl"):
        if r.status is Status.OK and (keys is None or kernel_key(r) in keys):
            fwd = next(p.measurement.stats.median for p in r.parts if p.direction == "fwd")
            out[r.kernel.op] = out.get(r.kernel.op, 0.0) + fwd * r.kernel.count
    return out


@pytest.mark.slow
def test_cpu_report_against_its_measured_peaks(cpu_runs: dict[str, Path]) -> None:
    """CPU runs measure their ceilings (a GEMM with the run's threads, a copy): % of peak is there."""
    shown = run_cli("deepbench", "models", "report", str(cpu_runs["a"]))
    assert shown.returncode == 0, shown.stderr
    assert "share" in shown.stdout and "no measured ceilings" not in shown.stdout and "threads" in shown.stdout
    (rep,) = json.loads(run_cli("deepbench", "models", "report", str(cpu_runs["a"]), "--format", "json").stdout)
    assert not rep["peaks_note"] and all(t["pct_peak_flops"] and t["bound"] for t in rep["types"])
    assert {t["op"] for t in rep["types"]} == {"conv", "gemm"}  # the whole-model row is no operator type
    assert any(
        r.kernel.op == WHOLE_MODEL_OP and r.status is Status.OK for r in read_results(cpu_runs["a"] / "results.jsonl")
    )


@pytest.mark.slow
def test_compare_two_thread_counts_on_cpu(cpu_runs: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    a, b = load_model_run(cpu_runs["a"]), load_model_run(cpu_runs["b"])
    cmp = compare_runs(a, b)
    assert cmp.model == "resnet50" and cmp.batch == 1 and "1 threads" in cmp.device_b
    assert cmp.device_a != cmp.device_b or len(usable_cpus()) == 1
    (pc,) = cmp.precisions
    assert pc.only_a == ["conv/model/003/fp32"] and pc.only_b == []  # the whole-model row is not an operator
    both = {kernel_key(r) for r in b.results}
    expect_a, expect_b = fwd_time_per_op(cpu_runs["a"], both), fwd_time_per_op(cpu_runs["b"])
    for t in pc.types:
        assert t.time_a_us == pytest.approx(expect_a[t.op]) and t.time_b_us == pytest.approx(expect_b[t.op])
        assert t.speedup == pytest.approx(expect_a[t.op] / expect_b[t.op])
    # both measured their ceilings with their own threads: the peak ratio is B's GEMM over A's
    ceilings = [json.loads((cpu_runs[k] / "run.json").read_text())["ceilings"] for k in ("a", "b")]
    assert pc.flops_ratio == pytest.approx(ceilings[1]["tflops_fp32"] / ceilings[0]["tflops_fp32"])
    assert not pc.ratio_note
    assert main(["models", "compare", str(cpu_runs["a"]), str(cpu_runs["b"]), "--precision", "fp32"]) == 0
    shown = capsys.readouterr().out
    assert "speed-up" in shown and "only in A (1)" in shown
    # mistakes: one line, exit 2
    for args, words in (
        ([str(cpu_runs["a"]), str(cpu_runs["b32"])], "different batches"),
        ([str(cpu_runs["a"]), str(cpu_runs["a"] / "nothing")], "no results folder"),
        ([str(cpu_runs["a"]), str(cpu_runs["b"]), "--precision", "fp16"], "not in both runs"),
        ([str(H200_BERT), str(H200_RESNET)], "different models"),
    ):
        assert main(["models", "compare", *args]) == 2, args
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err


# ----- the committed H200 runs -----------------------------------------------------------------
def test_h200_report_against_its_measured_peaks() -> None:
    run = load_model_run(H200_RESNET)
    assert run.device == "NVIDIA H200" and run.batch == 32 and run.ceilings
    reports = {rep.precision: rep for rep in model_reports(run.results, ceilings=run.ceilings, device=run.device)}
    assert set(reports) == {"fp32", "fp16"}
    for prec, rep in reports.items():
        assert rep.peak_tflops == run.ceilings[f"tflops_{prec}"] and rep.peaks_note == ""
        for t in rep.types:
            if t.flops:
                assert t.pct_peak_flops == pytest.approx(100 * t.flops / t.time_us / 1e6 / rep.peak_tflops)
            assert t.pct_peak_bandwidth == pytest.approx(
                100 * t.min_bytes / t.time_us / 1e3 / run.ceilings["gbps_copy"]
            )
            # the roof is the one the GPU backend wrote into each part
            carried = sum(
                p.info["roofline"]["bound_us"] * r.kernel.count
                for r in run.results
                if r.kernel.op == t.op and r.precision.name.value == prec
                for p in r.parts
                if p.direction == "fwd"
            )
            assert t.roof_us == pytest.approx(carried)
            assert 0 < t.pct_of_roof < 150  # on or under the roof, bar a part the backend measured a little over it
        types = {t.op: t for t in rep.types}
        assert types["activation"].bound == types["batch_norm"].bound == "memory"
        assert types["activation"].pct_of_roof == pytest.approx(types["activation"].pct_peak_bandwidth)
    assert {t.op: t for t in reports["fp32"].types}["conv"].bound == "compute"
    shown = run_cli("deepbench", "models", "report", str(H200_RESNET))
    assert shown.returncode == 0 and "% peak FLOPS" in shown.stdout and "measured peaks" in shown.stdout, shown.stderr


def test_h200_against_itself_follows_the_ratio() -> None:
    run = load_model_run(H200_RESNET)
    cmp = compare_runs(run, run)
    assert [pc.precision for pc in cmp.precisions] == ["fp32", "fp16"]
    for pc in cmp.precisions:
        assert pc.flops_ratio == pytest.approx(1.0) and pc.bandwidth_ratio == pytest.approx(1.0)
        assert all(t.speedup == pytest.approx(1.0) and not t.flags for t in pc.types)
        assert not pc.only_a and not pc.only_b and sum(t.kernels for t in pc.types) == H200_RESNET_OPERATORS


@pytest.mark.slow
def test_h200_against_a_cpu_run(cpu_runs: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    h200, cpu = load_model_run(H200_RESNET), load_model_run(cpu_runs["b32"])
    cmp = compare_runs(h200, cpu)
    assert cmp.batch == 32 and cmp.notes == ["fp16 only in A: not compared"]
    (pc,) = cmp.precisions
    assert {t.op for t in pc.types} == {"gemm", "activation", "batch_norm"}
    assert all(t.speedup < 1 for t in pc.types)  # the CPU (B) is slower on every type
    # the CPU measured its ceilings too: the FLOPS ratio is its GEMM's over the H200's
    cpu_peak = json.loads((cpu_runs["b32"] / "run.json").read_text())["ceilings"]["tflops_fp32"]
    assert pc.flops_ratio == pytest.approx(cpu_peak / h200.ceilings["tflops_fp32"]) and not pc.ratio_note
    assert len(pc.only_a) == H200_RESNET_OPERATORS - 3 and not pc.only_b
    assert {t.op: t.bound for t in pc.types} == {"gemm": "compute", "activation": "memory", "batch_norm": "memory"}
    assert main(["models", "compare", str(H200_RESNET), str(cpu_runs["b32"]), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device_a"] == "NVIDIA H200" and data["precisions"][0]["flops_ratio"] == pytest.approx(pc.flops_ratio)
