"""tests/benchmarks/mkl_side_by_side.py on two small GEMMs: it builds the native loop with gcc against the
mkl wheel's library (skipped with one line where gcc or mkl-devel is missing), runs it and the harness in
turns, finds the leading dimensions the harness recorded to be the ones the loop computed DeepBench's way,
and prints every kernel's ratio and the summary. No timing figure is asserted (a shared CI machine's
ratios wander): the figures are the script's to report on a quiet machine."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import load_benchmark

sbs = load_benchmark("mkl_side_by_side")
MISSING = sbs.missing_tools()
# The smoke suite's 64 x 1 x 1216 (N N) and 512 x 16 x 512 (N T) GEMMs.
TWO_KERNELS = ["--suite", "smoke", "--where", "k<=1216"]
ROW = re.compile(r"^(gemm/\S+/(fp32|int8))\s+([NT] [NT] \d+ \d+ \d+)\s+(\d+/\d+/\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"needs gcc and mkl-devel to build the native loop: {MISSING}")
def test_side_by_side_runs_both_sides_on_two_kernels(tmp_path: Path) -> None:
    out = io.StringIO()
    args = [*TWO_KERNELS, "--rounds", "2", "--fast", "--threads", "1", "--min-us", "0", "--no-torch"]
    args += ["--build-dir", str(tmp_path / "build"), "--keep", str(tmp_path / "runs")]
    with contextlib.redirect_stdout(out):
        assert sbs.main(args) == 0
    text = out.getvalue()
    rows = {m.group(1): m for m in (ROW.match(line) for line in text.splitlines()) if m}
    assert set(rows) == {f"gemm/{k}/{p}" for k in ("inference_device/003", "train/138") for p in ("fp32", "int8")}, text
    assert rows["gemm/train/138/int8"].group(3) == "N T 512 16 512"
    assert rows["gemm/train/138/int8"].group(4) == "528/144/528"  # FIX_LD as bench.cpp: the loop agreed
    assert all(float(m.group(5)) > 0 and float(m.group(6)) > 0 and float(m.group(7)) > 0 for m in rows.values())
    assert "LEADING DIMENSIONS DIFFER" not in text
    for name in ("fp32", "int8", "all"):
        assert re.search(rf"^SUMMARY {name}: \d+ of \d+ GEMMs of 0 us or more within \[0.95, 1.05\]", text, re.M), text
    assert (tmp_path / "runs" / "mkl-1" / "results.jsonl").is_file()


@pytest.mark.skipif(bool(MISSING), reason=f"needs gcc and mkl-devel to build the native loop: {MISSING}")
def test_the_loop_makes_deepbenchs_calls_on_its_command_line_and_stdin(tmp_path: Path) -> None:
    binary = sbs.build(tmp_path)
    argv = subprocess.run([str(binary), "--trials", "2", "fp32,T,N,200,3,130"], capture_output=True, text=True)
    assert argv.returncode == 0, argv.stderr
    lines = [x.split() for x in argv.stdout.splitlines() if not x.startswith("#")]
    assert lines[0][:9] == ["fp32", "T", "N", "200", "3", "130", "272", "272", "272"] and len(lines[0]) == 13
    assert float(lines[0][10]) >= 0  # the cores other processes kept busy meanwhile
    assert "# mode direct beta 1 trials 2 repeat 10" in argv.stdout  # bench.cpp's beta unless told
    stdin = "int8 N N 64 1 1216\nnot a problem\n"
    piped = subprocess.run([str(binary), "--packed", "--beta", "0"], input=stdin, capture_output=True, text=True)
    assert piped.returncode == 0, piped.stderr
    assert "int8 N N 64 1 1216 144 1296 144 " in piped.stdout and "error not a problem" in piped.stdout
    assert subprocess.run([str(binary), "--trials", "0"], capture_output=True).returncode == 2
