"""Stop means stop (issue 42): `deepbench-run` started by a shell script as a background job
(`cmd &`: the shell starts it with SIGINT ignored, and its children inherit that, as under Slurm
or systemd) stops within seconds of SIGTERM or SIGHUP, with its measured results intact and the
run resumable. Before, the runner forwarded the stop as SIGINT, which the harness ignored, and the
harness went on until it was SIGKILLed 30 s later."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from deepbench.kernels.results import RunRecord
from deepbench.kernels.results_file import read_results, scan

from .conftest import run_cli

HANG_FOURTH = "hang:conv/inference_server/006"  # three results, then the harness hangs in the fourth
STOP_S = 10.0  # the runner waits 30 s for the harness before killing it: well under that
WAIT_S = 180.0
SCRIPT = """#!/bin/sh
# As a batch script would: the run in the background, then wait for it.
DEEPBENCH_FAULT={fault} deepbench-run --local --suite smoke --ops gemm,conv --fast --threads 1 --quiet \\
    --out "$1" >"$1.stdout" 2>"$1.stderr" &
echo $! >"$1.pid"
wait $!
echo $? >"$1.rc"
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_background_job_stops_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT.format(fault=HANG_FOURTH))
    out = tmp_path / "run"
    shell = subprocess.Popen(["sh", str(script), str(out)], start_new_session=True)
    try:
        end = time.monotonic() + WAIT_S
        while len(scan(out / "results.jsonl").results) < 3 if (out / "results.jsonl").exists() else True:
            assert time.monotonic() < end and shell.poll() is None, "the run did not start measuring"
            time.sleep(0.2)
        runner = int(Path(f"{out}.pid").read_text())
        with open(f"/proc/{runner}/status") as f:  # the premise: the job runs with SIGINT ignored
            ignored = int(next(x for x in f if x.startswith("SigIgn:")).split()[1], 16)
        assert ignored & (1 << (signal.SIGINT - 1)), "the shell did not start the job with SIGINT ignored"
        sent = time.monotonic()
        os.kill(runner, sig)
        shell.wait(timeout=WAIT_S)
        took = time.monotonic() - sent
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
    rc = int(Path(f"{out}.rc").read_text())
    stderr = Path(f"{out}.stderr").read_text()
    assert rc == 128 + sig, stderr
    assert took < STOP_S, f"stopped {took:.1f} s after {sig.name}: the harness did not stop when asked"
    assert "Traceback" not in stderr, stderr
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "interrupted"
    kept = read_results(out / "results.jsonl")
    assert len(kept) == 3 and scan(out / "results.jsonl").clean  # measured results intact
    proc = run_cli("deepbench-run", "--resume", str(out), "--quiet", timeout=WAIT_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    again = read_results(out / "results.jsonl")
    assert len(again) == 5 and [r.model_dump() for r in again[:3]] == [r.model_dump() for r in kept]
