"""Finished runs stored compressed (results.jsonl.gz: the published runs and the committed evidence) read as
the plain file does in every command (kernels/results_file.py read_bytes); a compressed run is never written
to; and the repository stays small: result data compressed, the tree under its size limit."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deepbench.kernels.results import RESULTS_FILE
from deepbench.kernels.results_file import read_results, scan

from .conftest import REPO, run_cli

H100_TRAIN = REPO / "runner" / "published" / "nvidia-h100" / "train"
# A tracked file over this size must be compressed result data; all tracked files together stay under the total.
LARGEST_PLAIN_FILE = 1_000_000
# A clone travels to a lent GPU machine whose limit is 64 MiB (67.1 MB) with the wheels it needs beside it (at
# most 41 MB so far: NCCL's, MPICH's, cudnn-frontend's...; 37 MB for issue 56's sitting). 20 MB leaves them room;
# raised from 15 when the H200's inference-server was re-published with the cuDNN backend's records (issue 43), from 16
# when its train was (issue 56: its results hold every direction's cuDNN census) with the Intel backends beside.
TREE_LIMIT = 20_000_000
COMPRESSED_DATA = (".jsonl.gz", ".json.gz")


def _compressed_copy(src: Path, dst: Path) -> Path:
    """A copy of run folder `src` whose results exist only compressed."""
    shutil.copytree(src, dst)
    plain = dst / RESULTS_FILE
    if plain.exists():
        (dst / (RESULTS_FILE + ".gz")).write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    return dst


def test_a_compressed_run_reads_as_the_plain_one(smoke_run: Path, tmp_path: Path) -> None:
    packed = _compressed_copy(smoke_run, tmp_path / "packed")
    plain = read_results(smoke_run / RESULTS_FILE)
    assert [r.model_dump() for r in read_results(packed / RESULTS_FILE)] == [r.model_dump() for r in plain]
    assert scan(packed / RESULTS_FILE).clean


def test_every_command_opens_a_compressed_run(smoke_run: Path, tmp_path: Path) -> None:
    """report, compare, fastest and submit + check on a run stored compressed, as the published ones are."""
    packed = _compressed_copy(smoke_run, tmp_path / "packed")
    for argv in (
        ["report", str(packed), "--format", "csv"],
        ["compare", f"A={smoke_run}", f"B={packed}"],
        ["fastest", f"A={smoke_run}", f"B={packed}"],
    ):
        p = run_cli("deepbench", *argv)
        assert p.returncode == 0, (argv, p.stderr[-1500:])
    bundle = tmp_path / "bundle"
    p = run_cli(
        "deepbench", "submit", str(packed), "--out", str(bundle), "--submitter", "test", "--system-name", "this machine"
    )
    # 1: written, with problems (a working tree with uncommitted changes makes a "modified" run): not the results'
    assert p.returncode in (0, 1) and "results.jsonl" not in p.stdout + p.stderr, p.stdout[-1500:] + p.stderr[-1500:]
    assert (bundle / "results.jsonl").read_bytes() == (smoke_run / RESULTS_FILE).read_bytes()
    check = run_cli("deepbench", "check", str(bundle))
    assert check.returncode in (0, 1) and "Traceback" not in check.stderr, check.stderr[-1500:]


def test_a_compressed_run_is_never_resumed(smoke_run: Path, tmp_path: Path) -> None:
    packed = _compressed_copy(smoke_run, tmp_path / "packed")
    before = {p.name: p.read_bytes() for p in packed.iterdir() if p.is_file()}
    p = run_cli("deepbench-run", "--resume", str(packed))
    assert p.returncode == 2 and "stored compressed" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert {q.name: q.read_bytes() for q in packed.iterdir() if q.is_file()} == before
    fresh = run_cli("deepbench-run", "--local", "--suite", "smoke", "--out", str(packed))
    assert fresh.returncode == 2 and "already holds a run" in fresh.stderr, fresh.stderr


def test_the_published_runs_are_compressed_and_open(tmp_path: Path) -> None:
    assert (H100_TRAIN / "results.jsonl.gz").is_file() and not (H100_TRAIN / RESULTS_FILE).exists()
    p = run_cli("deepbench", "report", str(H100_TRAIN), "--format", "md", "--out", str(tmp_path / "r.md"))
    assert p.returncode == 0 and (tmp_path / "r.md").stat().st_size > 10_000, p.stderr[-1500:]


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("not a git checkout: the repository's size is checked on a clone")
    return [REPO / name for name in out.decode().split("\0") if name and (REPO / name).is_file()]


def test_the_repository_holds_the_tool_not_the_lab() -> None:
    """Result data over 1 MB is stored compressed, and the tracked tree stays under TREE_LIMIT (a clone
    travels to a GPU machine whose limit is 64 MiB, with wheels beside it)."""
    tracked = _tracked()
    big = [
        str(p.relative_to(REPO))
        for p in tracked
        if p.stat().st_size > LARGEST_PLAIN_FILE and not p.name.endswith(COMPRESSED_DATA)
    ]
    assert not big, f"tracked files over {LARGEST_PLAIN_FILE:,} bytes that are not compressed result data: {big}"
    total = sum(p.stat().st_size for p in tracked)
    assert total < TREE_LIMIT, f"tracked files total {total:,} bytes (limit {TREE_LIMIT:,})"
