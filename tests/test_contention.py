"""Contention is measured, not only warned about (issue 42): with a real busy process on one of
the run's CPUs, a CPU run whose threads need every CPU flags its results `contended` (each
measurement records the cores the others kept busy meanwhile), `check --strict` refuses them and
`verify` does not judge them; and a run left to its default thread count leaves the busy core alone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepbench.kernels.noise import usable_cpus
from deepbench.kernels.results import KernelResult, Status
from deepbench.kernels.results_file import read_results
from deepbench.runner.submission.verify import ToleranceRule, compare

from .conftest import run_cli

BUSY_FOR_S = 240  # the busy process ends by itself after this, whatever happens to the test
RUN = ("deepbench-run", "--local", "--suite", "smoke", "--ops", "gemm", "--quiet")  # default mode: >= 0.2 s each


@pytest.fixture
def busy_core() -> Iterator[int]:
    """A process spinning on the run's first CPU (bounded in time)."""
    cpu = usable_cpus()[0]
    code = (
        f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + {BUSY_FOR_S}\n"
        "while time.time() < end:\n    pass\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield cpu
    finally:
        proc.kill()
        proc.wait()


def test_results_taken_beside_a_busy_process_are_contended(busy_core: int, tmp_path: Path) -> None:
    cpus = len(usable_cpus())
    out = tmp_path / "run"
    proc = run_cli(*RUN, "--threads", str(cpus), "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    results = [r for r in read_results(out / "results.jsonl") if r.status is Status.OK]
    assert results and all(
        p.measurement.others_cores is not None and p.measurement.spare_cores == 0 for r in results for p in r.parts
    )
    flagged = [r for r in results if "contended" in r.flags]
    assert flagged, [(r.id, [p.measurement.others_cores for p in r.parts]) for r in results]
    # The flag follows from the record: check re-derives it; --strict refuses to judge on it.
    bundle = tmp_path / "bundle"
    proc = run_cli("deepbench", "submit", str(out), "--out", str(bundle), "--submitter", "CI", "--system-name", "VM")
    assert "Traceback" not in proc.stderr
    strict = run_cli("deepbench", "check", str(bundle), "--strict", "--allow-modified", env={"COLUMNS": "300"})
    assert strict.returncode == 1 and "contended" in strict.stdout, strict.stdout
    plain = run_cli("deepbench", "check", str(bundle), "--allow-modified", env={"COLUMNS": "300"})
    assert "flag 'contended'" not in plain.stdout, plain.stdout  # the flag agrees with the measurements
    # verify does not judge a contended kernel: unverifiable, saying why.
    quiet = flagged[0].model_copy(update={"flags": tuple(f for f in flagged[0].flags if f != "contended")})
    for submitted, rerun in ((flagged[0], quiet), (quiet, flagged[0])):
        (c,) = compare([submitted], [rerun], ToleranceRule())
        assert c.verdict == "unverifiable" and "contended" in c.reason


def test_default_threads_leave_a_busy_core_alone(busy_core: int, tmp_path: Path) -> None:
    cpus = len(usable_cpus())
    if cpus < 2:
        pytest.skip("one usable CPU: no core to leave alone")
    out = tmp_path / "run"
    proc = run_cli(*RUN, "--limit", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    device = json.loads((out / "run.json").read_text())["device"]
    assert device["threads"] <= cpus - 1, device
    kept: list[KernelResult] = read_results(out / "results.jsonl")
    assert all(
        p.measurement.spare_cores and p.measurement.spare_cores >= 1
        for r in kept
        if r.status is Status.OK
        for p in r.parts
    )
