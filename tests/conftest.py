"""Shared fixtures (every test its own user cache folder), and what a test needs from the machine. Tests that
need a Docker daemon, ARM emulation, a Slurm cluster or a browser run for real under CI=true (.ci/run installs
and starts them) and fail there if they cannot; elsewhere they skip with one line naming what is missing and how
to run them. GPU tests skip wherever no GPU is visible (CI has none)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
# DeepBench's kernel tables and published workbooks, as extracted from its repository (Apache-2.0): the
# input that the catalog and reference tests re-derive the package data from (tests/fixtures/deepbench/README.md).
DEEPBENCH_DATA = REPO / "tests" / "fixtures" / "deepbench"
BENCHMARKS = REPO / "tests" / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """A script of tests/benchmarks imported by its name, as the scripts import each other (registered
    in sys.modules first: dataclasses look their module up while the script loads)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_cli(
    *args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """Run an installed console script as a user would."""
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})}
    )


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
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.fixture
def deepbench_data() -> Path:
    """DeepBench's own data (tests/fixtures/deepbench), which the package data is made from."""
    return DEEPBENCH_DATA


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


# Marks that say what a test needs (pyproject's [tool.pytest.ini_options] markers); pytest_runtest_setup acts on them.
requires_gpu = pytest.mark.gpu
IN_CI = os.environ.get("CI") == "true"
HOW_TO_RUN = "as root, `CI=true bash .ci/run` installs and starts it and runs them"
BINFMT_AARCH64 = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
DOCKER_PING_TIMEOUT_S = 10


def require(missing: str, need: str) -> None:
    """Run, skip or fail a test that needs `need`: nothing `missing` runs it; under CI=true a missing
    piece fails it (CI installs everything); elsewhere it is skipped with one line saying what is missing
    and how to run it. Raised from here, pytest's summary folds equal reasons into one line."""
    if not missing:
        return
    if IN_CI:
        pytest.fail(f"CI must run this test: it needs {need}, and {missing}", pytrace=False)
    pytest.skip(f"needs {need}: {missing} ({HOW_TO_RUN})")


@cache
def docker_missing() -> str:
    """Why no Docker daemon can be used here ('' when one answers)."""
    try:
        import docker

        docker.from_env(timeout=DOCKER_PING_TIMEOUT_S).ping()
    except ImportError:
        return "the docker SDK is not installed (pip install docker)"
    except Exception as exc:  # noqa: BLE001 - any failure to reach the daemon means the same here
        where = os.environ.get("DOCKER_HOST", "its default socket")
        return f"no Docker daemon answers at {where} ({type(exc).__name__})"
    return ""


def arm_emulation_missing() -> str:
    """Why arm64 binaries cannot run here ('' when qemu-user is registered with binfmt_misc)."""
    if BINFMT_AARCH64.exists():
        return ""
    return "qemu-aarch64 is not registered with binfmt_misc (apt-get install qemu-user-static binfmt-support)"


def chromium_missing() -> str:
    """Why no headless browser can be driven here ('' when Debian's Chromium is installed)."""
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return ""
    return "Chromium is not installed (apt-get install chromium)"


@pytest.fixture(scope="session")
def docker_client():
    """The Docker daemon's client, for the tests that use a daemon (run or fail in CI, skipped elsewhere)."""
    require(docker_missing(), "a Docker daemon")
    import docker

    return docker.from_env()


def local_base_missing() -> str:
    """Why images/tools/local-base.sh cannot make a Debian base image here ('' when it can)."""
    if os.geteuid() != 0:
        return "debootstrap makes the base image as root"
    if not (shutil.which("debootstrap") or shutil.which("debootstrap", path="/usr/sbin:/sbin")):
        return "debootstrap is not installed (apt-get install debootstrap)"
    return ""


@pytest.hookimpl(tryfirst=True)  # before pytest's own skipif marks, so that equal reasons fold into one line
def pytest_runtest_setup(item: pytest.Item) -> None:
    """What a test needs, from its marks: a GPU (skipped without one, CI included), ARM emulation, a
    browser, a cluster, and a Docker daemon for the tests that use the docker_client fixture (run or fail in
    CI, skipped elsewhere)."""
    if item.get_closest_marker("gpu") and not has_cuda():
        pytest.skip("needs an NVIDIA GPU (none visible to PyTorch here; docs/nvidia.md says how the GPU tests are run)")
    if "docker_client" in item.fixturenames:
        require(docker_missing(), "a Docker daemon")
    if {"base_image", "arm_image"} & set(item.fixturenames):
        require(local_base_missing(), "a local Debian base image")
    if item.get_closest_marker("arm_emulation"):
        require(arm_emulation_missing(), "arm64 emulation")
    if item.get_closest_marker("browser"):
        require(chromium_missing(), "headless Chromium")
    if item.get_closest_marker("cluster"):
        from .cluster import missing

        require(missing(), "a two-host Slurm cluster built from network namespaces")


@pytest.fixture(autouse=True)
def own_cache_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test its own user cache folder (XDG_CACHE_HOME, which the find-dbs live under: the cuDNN engine
    cache among them), also for the runs it starts: no test reads what another, or the user, raced."""
    folder = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


PYTHON = sys.executable


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """One real smoke run (--fast) for the report, table and browser tests of the session."""
    out = tmp_path_factory.mktemp("smoke") / "run"
    p = run_cli("deepbench-run", "--local", "--suite", "smoke", "--fast", "--out", str(out), timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return out
