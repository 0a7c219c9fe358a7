"""The oneapi backend (issue 55): the CPU and Intel platforms' default, each operation on the backend of its Intel
library (GEMM and sparse GEMM on mkl, convolutions and RNNs on onednn), what neither runs on PyTorch, with the
reason; real runs on the libraries (no mocks), skipped with one line where Intel's wheels are missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deepbench.kernels.backends import declaration_of
from deepbench.kernels.backends.cpu.wheel_libraries import wheel_library_folder
from deepbench.kernels.backends.mkl import binding as mkl_binding
from deepbench.kernels.backends.oneapi.declaration import ONEAPI
from deepbench.kernels.backends.onednn import binding as onednn_binding
from deepbench.kernels.results import RESULTS_FILE, Status
from deepbench.kernels.results_file import read_results
from deepbench.runner.platforms import get_platform

from .conftest import local_run, run_cli

HAS_MKL = (wheel_library_folder(mkl_binding.LIBRARY) / mkl_binding.LIBRARY).is_file()
MISSING = onednn_binding.not_installed(ONEAPI.install_hint) or ("" if HAS_MKL else f"no {mkl_binding.LIBRARY}")
needs_intel = pytest.mark.skipif(bool(MISSING), reason=f"needs Intel's wheels: {MISSING}")
SERVED = {"gemm": "mkl", "sparse_gemm": "mkl", "conv": "onednn", "rnn": "onednn"}
MODIFIED_TREE = "run from a modified source tree"


def test_the_cpu_and_intel_platforms_run_it_and_it_routes_by_its_declaration() -> None:
    assert get_platform("cpu").backend == get_platform("intel").backend == "oneapi"
    assert {op: ONEAPI.serves[op] for op in SERVED} == SERVED and ONEAPI.fallback == "torch"
    assert declaration_of("oneapi").delegates == ("mkl", "onednn", "torch")


@needs_intel
@pytest.mark.slow
def test_smoke_runs_each_operation_on_its_intel_library_and_its_bundle_passes_check(tmp_path: Path) -> None:
    run = local_run(tmp_path / "run", "--suite", "smoke", "--fast")  # the cpu platform: no --backend
    results = read_results(run / RESULTS_FILE)
    for r in results:
        assert r.status is Status.OK and r.check is not None and r.check.passed, (r.id, r.reason)
        assert r.backend == SERVED.get(r.op, "torch"), (r.id, r.backend)
    gemm = next(r for r in results if r.op == "gemm")
    # PyTorch (the fallback) holds GNU OpenMP in this process: MKL shares it rather than load Intel's beside it.
    assert gemm.parts[0].info["mkl"]["threading_layer"] == "gnu", gemm.parts[0].info
    bundle = tmp_path / "bundle"
    submit = run_cli("deepbench", "submit", str(run), "--out", str(bundle), "--submitter", "CI", "--system-name", "VM")
    problems = [line for line in submit.stdout.splitlines() if line.startswith("PROBLEM")]
    assert all(MODIFIED_TREE in line for line in problems), submit.stdout + submit.stderr
    assert run_cli("deepbench", "check", str(bundle), "--allow-modified").returncode == 0


@needs_intel
@pytest.mark.slow
@pytest.mark.parametrize(
    "suite, extra",
    [
        ("inference-device", ["--ops", "gemm,conv,rnn,sparse_gemm"]),
        ("train", ["--limit", "2"]),
        ("inference-server", ["--limit", "2"]),
    ],
)
def test_deepbench_sets_report_every_kernel_ok_or_unsupported_with_a_reason(
    tmp_path: Path, suite: str, extra: list[str]
) -> None:
    run = local_run(tmp_path / "run", "--suite", suite, "--fast", *extra)
    for r in read_results(run / RESULTS_FILE):
        assert r.status in (Status.OK, Status.UNSUPPORTED), (r.id, r.status, r.reason)
        assert r.status is Status.OK or len(r.reason) > 20, (r.id, r.reason)
        if r.status is Status.OK:
            assert r.check is not None and r.check.passed, r.id


def test_without_intel_s_libraries_each_kernel_runs_on_pytorch_and_says_why(tmp_path: Path) -> None:
    """In a process where neither library can load, the router hands every kernel to PyTorch, whose result names
    the missing library (`native_unavailable`), as the nvidia backend does without NVIDIA's bindings."""
    code = (
        "from pathlib import Path\n"
        "from deepbench.kernels.backends.mkl import binding as m\n"
        "from deepbench.kernels.backends.onednn import binding as o\n"
        "m.LIBRARY = 'libmkl_rt-absent.so.3'\n"
        f"o.library_folder = lambda: Path({str(tmp_path)!r}); o.LIBRARY = 'libdnnl-absent.so.3'\n"
        "from deepbench.kernels.backends import load_backend\n"
        "from deepbench.kernels.catalog import by_id\n"
        "from deepbench.kernels.harness.execute import run_item\n"
        "from deepbench.kernels.results import PlanItem, Settings\n"
        "s = Settings(mode='fast', time_cap_s=0.05, threads=1)\n"
        "b = load_backend('oneapi', s)\n"
        "for kid in ('gemm/train/138', 'conv/inference_server/006'):\n"
        "    r = run_item(b, PlanItem(kernel=by_id()[kid], precision='fp32'), s)\n"
        "    print(r.status.value, r.backend, r.info.get('native_unavailable', ''), sep='|')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line.split("|") for line in proc.stdout.strip().splitlines()]
    assert [(s, b) for s, b, _ in lines] == [("ok", "torch"), ("ok", "torch")], lines
    assert all("deepbench[intel]" in why for _, _, why in lines), lines
