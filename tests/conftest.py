"""Shared fixtures. Tests that need Docker, MPI or ARM emulation run for real in CI (.ci/run
installs and starts them); only GPU tests skip where no GPU exists."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "deepbench"


def run_cli(*args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess:
    """Run an installed console script as a user would."""
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})


def local_run(out: Path, *args: str) -> Path:
    """A real `deepbench-run --local` into `out`, which must finish (the test fails otherwise)."""
    proc = run_cli("deepbench-run", "--local", *args, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def local_bundle(root: Path, *args: str) -> Path:
    """A real local run under `root`, submitted as ROOT/bundle (vendor fields filled)."""
    run = local_run(root / "run", *args)
    bundle = root / "bundle"
    proc = run_cli("deepbench", "submit", str(run), "--out", str(bundle), "--submitter", "CI", "--system-name", "VM")
    assert "Traceback" not in proc.stderr, proc.stderr
    return bundle


def start_interruptible(args: list[str], env: dict | None = None) -> subprocess.Popen:
    """Start an installed console script that the test will stop with Ctrl-C (SIGINT). A shell
    starts `cmd &` with SIGINT ignored and children inherit that, so under a CI script run in the
    background Python would install no KeyboardInterrupt handler and the signal would be lost: the
    child gets the default disposition back, as in a terminal."""
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.fixture
def shared() -> Path:
    if not SHARED.exists():
        pytest.fail(f"DeepBench's reference data is expected beside the repository at {SHARED}")
    return SHARED


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.fixture
def root_or_skip() -> None:
    """Faults that need root (mounting a small or read-only tmpfs): CI runs as root and must run
    them; elsewhere they are skipped, saying why."""
    if os.geteuid() == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("this test mounts a tmpfs: CI runs as root (.ci/run), so it must run here")
    pytest.skip("needs root to mount a tmpfs (a full or read-only disk); CI runs it as root")


requires_gpu = pytest.mark.skipif(not has_cuda(), reason="needs an NVIDIA GPU (none visible to PyTorch here)")
PYTHON = sys.executable


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """One real smoke run (--fast) for the report, table and browser tests of the session."""
    out = tmp_path_factory.mktemp("smoke") / "run"
    p = run_cli("deepbench-run", "--local", "--suite", "smoke", "--fast", "--out", str(out), timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return out
