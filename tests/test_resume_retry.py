"""--resume --retry and what a resume trusts (issue 42): a kernel that failed (its harness killed)
is measured again by `--resume --retry failed,timeout`, its old result kept aside; --retry alone
is a one-line usage error; a record whose id is planned but whose kernel or precision is not the
plan's stops the resume with one line instead of counting as done."""

from __future__ import annotations

import json
from pathlib import Path

from deepbench.kernels.results import Status
from deepbench.kernels.results_file import REJECTED_FILE, read_results

from .conftest import run_cli

RUN = ("deepbench-run", "--local", "--suite", "smoke", "--ops", "gemm", "--fast", "--threads", "1", "--quiet")
CRASHED = "gemm/train/020/fp32"
WAIT_S = 300


def test_retry_measures_failed_kernels_again(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli(*RUN, "--out", str(out), env={"DEEPBENCH_FAULT": f"crash:{CRASHED}"}, timeout=WAIT_S)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr  # some kernel failed
    first = {r.id: r for r in read_results(out / "results.jsonl")}
    assert first[CRASHED].status is Status.FAILED
    run_cli("deepbench-run", "--resume", str(out), "--quiet", timeout=WAIT_S)  # a plain resume: nothing to do
    assert {r.id: r.status for r in read_results(out / "results.jsonl")}[CRASHED] is Status.FAILED  # not retried
    proc = run_cli("deepbench-run", "--resume", str(out), "--retry", "failed,timeout", "--quiet", timeout=WAIT_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    again = {r.id: r for r in read_results(out / "results.jsonl")}
    assert again[CRASHED].status is Status.OK and len(again) == len(first)
    assert all(again[i] == first[i] for i in first if i != CRASHED)  # the others kept as they were
    aside = [json.loads(x) for x in (out / REJECTED_FILE).read_text().splitlines()]
    assert any(CRASHED in a["text"] and "--retry" in a["reason"] for a in aside)  # the old result kept


def test_retry_needs_resume_and_valid_statuses(tmp_path: Path) -> None:
    for extra, words in (
        (("--retry", "failed"), "--resume"),
        (("--resume", str(tmp_path), "--retry", "ok"), "choose from failed, timeout"),
    ):
        proc = run_cli(*RUN, *extra)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr


def test_resume_compares_kernel_and_precision_not_only_the_id(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli(*RUN, "--limit", "2", "--out", str(out), timeout=WAIT_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    path = out / "results.jsonl"
    records = [json.loads(x) for x in path.read_text().splitlines()]
    records[0]["kernel"]["k"] += 1  # the planned id, other parameters
    records[0]["params"]["k"] += 1
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = run_cli("deepbench-run", "--resume", str(out), "--quiet", timeout=WAIT_S)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-2000:] + proc.stderr
    assert "kernel or precision differs from plan.json's" in lines[0] and "line 1" in lines[0]
