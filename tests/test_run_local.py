"""`deepbench-run --local` end to end: results, checks, interruption, resume, failures, errors."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from deepbench.kernels.backends import pytorch as torch_backend
from deepbench.kernels.backends.pytorch.backend import TorchBackend
from deepbench.kernels.catalog import by_id
from deepbench.kernels.harness.execute import run_item
from deepbench.kernels.results import PlanItem, RunRecord, Settings, Status
from deepbench.kernels.results_file import read_results

from .conftest import run_cli, start_interruptible


def results(outdir: Path):
    return read_results(outdir / "results.jsonl")


def test_smoke_all_ok_with_checks(tmp_path: Path) -> None:
    out = tmp_path / "smoke"
    proc = run_cli("deepbench-run", "--local", "--suite", "smoke", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rs = results(out)
    assert len(rs) == 10 and len({r.id for r in rs}) == 10
    for r in rs:
        assert r.status is Status.OK, (r.id, r.reason)
        assert r.check.passed and all(p.check.passed for p in r.parts)
        assert r.time_us.median > 0
        assert r.time_us.n >= 3 or "unconverged" in r.flags  # a slow kernel on a loaded machine may stop at the cap
        assert r.library["torch"]
    # DeepBench's inference timed the forward pass only (conv_bench.cu: `if (!inference)`), and says so
    inference = next(r for r in rs if r.op == "conv" and r.kernel.set == "inference_server")
    assert [p.direction for p in inference.parts] == ["fwd"] and inference.info["directions"] == ["fwd"]
    assert inference.time_us.median == pytest.approx(inference.parts[0].measurement.stats.median)
    sparse = next(r for r in rs if r.op == "sparse_gemm")
    assert sparse.info["dense_time_us"]["median"] > 0 and sparse.info["speedup_vs_dense"] > 0
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "complete" and record.planned == 10
    assert record.device["kind"] == "cpu" and record.settings.threads is None
    assert "Dense matrix multiplication" in proc.stdout and "TFLOPS" in proc.stdout


@pytest.mark.parametrize("poison", ["wrong", "nan"])
def test_wrong_result_is_caught(monkeypatch: pytest.MonkeyPatch, poison: str) -> None:
    import torch

    real_mm = torch.mm

    def bad_mm(x, y, out=None):
        real_mm(x, y, out=out)
        out.view(-1)[out.numel() // 2] += 1.0 if poison == "wrong" else float("nan")
        return out

    monkeypatch.setattr(torch_backend.gemm.torch, "mm", bad_mm)
    settings = Settings(mode="fast", time_cap_s=0.05, min_samples=2)
    item = PlanItem(kernel=by_id()["gemm/train/138"], precision="fp32")
    result = run_item(TorchBackend(settings), item, settings)
    assert result.status is Status.FAILED
    assert "check failed" in result.reason
    assert result.time_us is None and not result.check.passed


def test_int8_gemm_is_exact_and_padded() -> None:
    settings = Settings(mode="fast", time_cap_s=0.05, min_samples=2)
    kernel = by_id()["gemm/inference_device/003"]  # 64 x 1 x 1216: DeepBench pads int8's m only, here aligned
    result = run_item(TorchBackend(settings), PlanItem(kernel=kernel, precision="int8"), settings)
    assert result.status is Status.OK, result.reason
    assert result.padding == {}
    assert result.check.method == "exact-int" and result.check.error == 0
    assert result.precision.accumulate == "int32"


def test_unsupported_says_why() -> None:
    settings = Settings(mode="fast")
    r = run_item(
        TorchBackend(settings), PlanItem(kernel=by_id()["conv/inference_server/006"], precision="int8"), settings
    )
    assert r.status is Status.UNSUPPORTED and "int8" in r.reason


def _wait_for_results(out: Path, n: int, proc: subprocess.Popen, limit: float = 120) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if len(results(out)) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("no results in time")


def test_interrupt_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The fourth kernel hangs, so the interrupt lands mid-run however fast the machine is.
    proc = start_interruptible(
        ["deepbench-run", "--local", "--suite", "smoke", "--fast", "--out", str(out)],
        env={"DEEPBENCH_FAULT": "hang:conv/inference_server/006"},
    )
    _wait_for_results(out, 3, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert "--resume" in stdout
    kept = results(out)
    assert len(kept) == 3
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "interrupted"

    again = run_cli("deepbench-run", "--resume", str(out))
    assert again.returncode == 0, again.stdout + again.stderr
    final = results(out)
    assert len(final) == 10 and len({r.id for r in final}) == 10
    assert [r.model_dump() for r in final[: len(kept)]] == [r.model_dump() for r in kept]
    assert RunRecord.model_validate_json((out / "run.json").read_text()).state == "complete"


def test_crashing_kernel_is_recorded_and_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "crash"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "smoke",
        "--fast",
        "--ops",
        "gemm",
        "--out",
        str(out),
        env={"DEEPBENCH_FAULT": "crash:gemm/train/020"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by = {r.id: r for r in results(out)}
    assert by["gemm/train/020/fp32"].status is Status.FAILED
    assert "SIGKILL" in by["gemm/train/020/fp32"].reason
    assert by["gemm/train/138/fp32"].status is Status.OK  # the run went on after the crash
    assert by["gemm/inference_device/003/fp32"].status is Status.OK


def test_hanging_kernel_times_out(tmp_path: Path) -> None:
    out = tmp_path / "hang"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "smoke",
        "--fast",
        "--ops",
        "gemm",
        "--out",
        str(out),
        "--kernel-timeout",
        "3",
        env={"DEEPBENCH_FAULT": "hang:gemm/train/020"},
    )
    assert proc.returncode == 1
    by = {r.id: r for r in results(out)}
    assert by["gemm/train/020/fp32"].status is Status.TIMEOUT
    assert by["gemm/train/138/fp32"].status is Status.OK


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--suite", "nope"], "unknown suite 'nope' (choose from: train, inference-server"),
        (["--ops", "gemm,fft"], "unknown operation 'fft' (choose from: gemm, conv"),
        (["--precision", "fp12"], "unknown precision 'fp12' (choose from: fp32"),
        (["--platform", "tpu"], "unknown platform 'tpu' (choose from: cpu"),
        (["--where", "m==="], "bad value"),
        (["--where", "m 3"], "malformed filter"),
        (["--where", "color=red"], "unknown field 'color'"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--limit", "x"], "invalid int value"),
        (["--resume", "/nonexistent/dir"], "nothing to resume"),
    ],
)
def test_user_errors_are_one_line_exit_2(args: list[str], needle: str, tmp_path: Path) -> None:
    proc = run_cli("deepbench-run", "--local", "--out", str(tmp_path / "x"), *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_existing_results_are_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "keep"
    out.mkdir()
    (out / "results.jsonl").write_text("")
    proc = run_cli("deepbench-run", "--local", "--out", str(out))
    assert proc.returncode == 2 and "--resume" in proc.stderr


def test_help_explains() -> None:
    proc = run_cli("deepbench-run", "--help")
    assert proc.returncode == 0
    for needle in ("--local", "--suite", "--resume", "--fast", "--rigorous", "--where", "Exit status"):
        assert needle in proc.stdout
