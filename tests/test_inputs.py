"""--inputs (kernels/inputs.py): what each distribution draws, DeepBench's rule by storage type,
the zero-input check that cannot pass on an output the call did not write, the record per result,
and `compare`'s warning when two runs drew different inputs (real CPU runs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from deepbench.kernels.backends.shared.torch_context import TorchContext
from deepbench.kernels.inputs import TRIVIAL, draw, drawn_for, poison, zero_input_check
from deepbench.kernels.precision import Precision
from deepbench.kernels.reference import int8_operands
from deepbench.kernels.reference.torch_checks import check_matmul
from deepbench.kernels.results_file import read_results

from .conftest import run_cli


@pytest.mark.parametrize(
    ("setting", "precision", "expected"),
    [
        ("deepbench", Precision.FP16, "zeros"),
        ("deepbench", Precision.FP16ACC16, "zeros"),
        ("deepbench", Precision.INT8, "zeros"),
        ("deepbench", Precision.BF16, "zeros"),
        ("deepbench", Precision.FP32, "uniform"),
        ("deepbench", Precision.TF32, "uniform"),
        ("normal", Precision.FP16, "normal"),
        ("zeros", Precision.FP32, "zeros"),
        ("uniform", Precision.INT8, "uniform"),
    ],
)
def test_deepbench_rule_follows_the_storage_type(setting: str, precision: Precision, expected: str) -> None:
    assert drawn_for(setting, precision) == expected


def test_torch_operands() -> None:
    def ctx(inputs: str) -> TorchContext:
        return TorchContext(torch.device("cpu"), 0, inputs=inputs)

    assert not ctx("deepbench").random((64, 64), torch.float16).any()
    assert not ctx("deepbench").random((64, 64), torch.int8).any()
    u = ctx("deepbench").random((64, 64), torch.float32)
    assert float(u.min()) >= 0 and float(u.max()) < 1 and float(u.std()) > 0.2
    n = ctx("normal").random((64, 64), torch.float32)
    assert float(n.min()) < -1 and torch.equal(n, ctx("normal").random((64, 64), torch.float32))  # seeded
    assert ctx("uniform").random((64, 64), torch.int8).abs().max() > 1  # int8 stays uniform integers


def test_cpu_runtime_operands() -> None:
    rng = np.random.default_rng(0)
    assert not draw(rng, (8, 8), Precision.INT8, "zeros", 1.0, int8_operands.weights).any()
    w = draw(rng, (8, 8), Precision.INT8, "normal", 1.0, int8_operands.weights)
    assert w.dtype == np.int8 and w.min() >= -127
    u = draw(rng, (100,), Precision.FP32, "deepbench", 0.5, int8_operands.activations)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 0.5


def test_zero_input_check_fails_on_an_unwritten_output() -> None:
    x, y = torch.zeros(16, 8), torch.zeros(8, 4)
    out = torch.empty(16, 4)
    assert poison(out) and bool(torch.isnan(out).all())
    unwritten = zero_input_check(check_matmul(out, x, y, Precision.FP32), poisoned=True)
    assert not unwritten.passed and TRIVIAL in unwritten.detail
    torch.mm(x, y, out=out)
    written = zero_input_check(check_matmul(out, x, y, Precision.FP32), poisoned=True)
    assert written.passed and written.error == 0.0 and "wrote every element" in written.detail
    ints = np.zeros(4, dtype=np.int32)
    assert poison(ints) and (ints == 1).all() and not poison(None)
    assert not math.isnan(written.tolerance)


def run(out: Path, *extra: str) -> list:
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "smoke",
        "--fast",
        "--ops",
        "gemm",
        "--limit",
        "2",
        "--out",
        str(out),
        *extra,
    )
    assert proc.returncode == 0, proc.stderr
    return read_results(out / "results.jsonl")


def test_inputs_recorded_and_compare_warns(tmp_path: Path) -> None:
    normal = run(tmp_path / "normal")
    zeros = run(tmp_path / "zeros", "--inputs", "zeros")
    assert {r.inputs for r in normal} == {"normal"} and {r.inputs for r in zeros} == {"zeros"}
    assert all(r.status.value == "ok" and TRIVIAL in r.check.detail for r in zeros)
    assert all(TRIVIAL not in r.check.detail for r in normal)
    proc = run_cli("deepbench", "compare", f"normal={tmp_path / 'normal'}", f"zeros={tmp_path / 'zeros'}")
    assert proc.returncode == 0, proc.stderr
    assert "warning: zeros drew zeros inputs where normal drew normal (2 kernels)" in proc.stderr
    same = run_cli("deepbench", "compare", str(tmp_path / "normal"), str(tmp_path / "normal"))
    assert "drew" not in same.stderr


def test_reproduce_command_keeps_inputs_energy_and_clock_lock() -> None:
    """A bundle's re-run command repeats --inputs, --energy/--energy-window and --lock-clocks."""
    import shlex

    from deepbench.kernels.results import Plan, Settings
    from deepbench.runner.launch.running.request import parse_request
    from deepbench.runner.platforms import get_platform
    from deepbench.runner.submission.bundle import reproduce_command

    for asked in (
        {"inputs": "deepbench", "energy": True, "energy_window_s": 1.0, "lock_clocks": "max"},
        {"inputs": "zeros", "lock_clocks": 1410},
        {},
    ):
        settings = Settings(device="cuda", warm_up_s=30.0, **asked)
        plan = Plan(
            run_id="r",
            suite="train",
            platform="nvidia",
            backend=get_platform("nvidia").backend,
            settings=settings,
            items=(),
        )
        command = reproduce_command(plan, local=True, image_digest=None)
        again = parse_request(shlex.split(command)[1:]).settings(get_platform("nvidia"))
        assert (again.inputs, again.energy, again.energy_window_s, again.lock_clocks) == (
            settings.inputs,
            settings.energy,
            settings.energy_window_s,
            settings.lock_clocks,
        )


def test_resume_refuses_other_inputs(tmp_path: Path) -> None:
    run(tmp_path / "r")
    proc = run_cli("deepbench-run", "--resume", str(tmp_path / "r"), "--inputs", "zeros", "--energy")
    assert proc.returncode == 2 and "--inputs 'zeros' differs from the run's 'normal'" in proc.stderr
    assert "--energy True differs" in proc.stderr and "Traceback" not in proc.stderr


def test_deepbench_references_drew_deepbenchs_inputs() -> None:
    """A published DeepBench figure was measured on DeepBench's inputs: zeros in fp16, uniform in fp32;
    a run from before --inputs drew normal values."""
    from deepbench.runner.analysis.compare import compare
    from deepbench.runner.analysis.like_for_like import input_warnings
    from deepbench.runner.analysis.sources import load_run, load_source

    run = load_run(Path(__file__).parents[1] / "runner" / "published" / "nvidia-h100" / "train")
    said = input_warnings(compare([load_source("ref:V100", run.set), run]))
    assert any("drew normal inputs where DeepBench V100 drew zeros" in w and "less power" in w for w in said)
    assert any("drew normal inputs where DeepBench V100 drew uniform" in w for w in said)
