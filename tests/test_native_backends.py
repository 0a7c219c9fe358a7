"""The NVIDIA-native backends' logic that needs no GPU: which library runs which kernel, what a
machine without the bindings says, DeepBench's server precisions, the cuDNN engine choice and
pins. (tests/test_gpu_native.py runs the libraries themselves on a GPU.)"""

from __future__ import annotations

import importlib.util
import json
import math
import types
from pathlib import Path

import pytest

from deepbench.kernels.backends.cudnn import engine_choice
from deepbench.kernels.backends.cudnn.engine_choice import Engine, NoCorrectEngine, choose, parse_spec, pin_for
from deepbench.kernels.backends.gpu.cuda import native
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Check, Settings
from deepbench.kernels.suites import select

from .conftest import has_cuda, run_cli

HAS_NVMATH = importlib.util.find_spec("nvmath") is not None


def _check(passed: bool, error: float = 0.0) -> Check:
    return Check(passed=passed, method="fake", error=error, tolerance=1e-3)


def _engines(n: int) -> list[Engine]:
    return [Engine(index=i, engine_id=10 + i, knobs={"TILE_SIZE": i}, name=f"eng{10 + i}", rank=i) for i in range(n)]


def test_the_fastest_correct_engine_is_chosen_and_wrong_ones_are_listed() -> None:
    es = _engines(4)
    times = {0: 50.0, 1: 20.0, 2: 30.0, 3: 40.0}
    wrong = {1}  # the fastest computes a wrong result
    choice = choose(
        es, lambda e, _: times[e.index], lambda e: _check(e.index not in wrong, 0.5 if e.index in wrong else 0)
    )
    assert choice.chosen.index == 2
    rows = {r["engine"]: r for r in choice.table}
    assert rows[es[1].spec]["status"] == "rejected" and "check failed" in rows[es[1].spec]["reason"]
    assert rows[es[0].spec]["status"] == "unchecked"  # slower than the margin: never run for a check
    assert choice.record()["rejected"] == 1 and choice.fastest_correct_us == 30.0


def test_within_the_margin_cudnns_own_ranking_decides() -> None:
    """Two engines half the margin apart: the one the heuristics rank first wins, whichever timed
    faster here, so noise between machines cannot flip the choice."""
    es = _engines(3)
    near = 10.0 * (1 + engine_choice.MARGIN / 2)
    for times in ({0: near, 1: 10.0, 2: 30.0}, {0: 10.0, 1: near, 2: 30.0}):
        assert choose(es, lambda e, _: times[e.index], lambda e: _check(True)).chosen.index == 0  # noqa: B023 - called at once
    # outside the margin the faster one wins
    far = {0: 10.0 * (1 + 2 * engine_choice.MARGIN), 1: 10.0, 2: 30.0}
    assert choose(es, lambda e, _: far[e.index], lambda e: _check(True)).chosen.index == 1


def test_each_candidate_is_told_how_slow_is_out_of_contest() -> None:
    """The first has nothing to beat; each later one is out of contest above OUT_OF_CONTEST times
    the fastest figure so far (one that could not run sets no figure)."""
    es = _engines(4)
    times = {0: 40.0, 2: 10.0, 3: 30.0}
    limits: list[float] = []

    def quick(e: Engine, out_of_contest_us: float) -> float:
        limits.append(out_of_contest_us)
        if e.index not in times:
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")
        return times[e.index]

    assert choose(es, quick, lambda e: _check(True)).chosen.index == 2
    k = engine_choice.OUT_OF_CONTEST
    assert limits == [math.inf, 40.0 * k, 40.0 * k, 10.0 * k]


def test_engines_that_cannot_run_or_all_fail_are_reported() -> None:
    es = _engines(2)

    def boom(e: Engine, out_of_contest_us: float) -> float:
        raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")

    with pytest.raises(NoCorrectEngine, match="did not run"):
        choose(es, boom, lambda e: _check(True))
    with pytest.raises(NoCorrectEngine, match="check failed"):
        choose(es, lambda e, _: 1.0, lambda e: _check(False, 1.0))


def test_plan_names_are_exact_pins() -> None:
    """cuDNN's plan names pin every knob (the frontend's knob list can leave some out)."""
    for name in ("eng49_k0=43_k2=5_k5=4_k14=4", "eng0", "eng7_k3=-1"):
        assert engine_choice.is_plan_name(name)
        engine_choice.check_pin(name)
    for bad in ("eng", "engine49", "eng49_k0", "eng49_k0=x", "49_k0=1"):
        assert not engine_choice.is_plan_name(bad)
        with pytest.raises(engine_choice.EngineError, match="plan_name"):
            engine_choice.check_pin(bad)
    engine_choice.check_pin("49:TILE_SIZE=5")


class _Knob:
    def __init__(self, name: str) -> None:
        self.name = name


class _Plans:
    """cudnn-frontend's graph, as far as a plan search sees it: named plans, one that cannot build."""

    def __init__(self, names: list[str | None]) -> None:
        self.names = names

    def create_execution_plans(self, modes: list[str]) -> None:
        assert modes == ["A", "FALLBACK"]

    def get_execution_plan_count(self) -> int:
        return len(self.names)

    def build_plan_at_index(self, i: int) -> None:
        if self.names[i] is None:
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")

    def get_plan_name_at_index(self, i: int) -> str | None:
        return self.names[i]

    def get_engine_and_knobs_at_index(self, i: int) -> tuple[int, dict[_Knob, int]]:
        return 49, {_Knob("TILE_SIZE"): 5, _Knob("NOT_SET"): 4}

    def get_workspace_size_plan_at_index(self, i: int) -> int:
        return 8 * i

    def deselect_behavior_notes(self, notes: list[str]) -> None:
        pass

    def deselect_workspace_greater_than(self, limit: int) -> None:
        pass


def test_a_pinned_plan_name_is_found_among_the_heuristics_plans() -> None:
    pytest.importorskip("torch")
    from deepbench.kernels.backends.contract.base import Unsupported
    from deepbench.kernels.backends.cudnn import conv

    cudnn = types.SimpleNamespace(heur_mode=types.SimpleNamespace(A="A", FALLBACK="FALLBACK"))
    plans = _Plans([None, "eng49_k2=5_k14=4", "eng49_k0=43_k2=5_k5=4_k14=4"])
    e = conv._pinned(cudnn, plans, "eng49_k0=43_k2=5_k5=4_k14=4")
    assert (e.index, e.engine_id, e.knobs, e.name, e.workspace) == (
        2,
        49,
        {"TILE_SIZE": 5},
        "eng49_k0=43_k2=5_k5=4_k14=4",
        16,
    )
    with pytest.raises(Unsupported, match="no plan named 'eng49_k0=1'"):
        conv._pinned(cudnn, plans, "eng49_k0=1")


def test_verify_pins_the_recorded_plan_name_where_there_is_one() -> None:
    from deepbench.kernels.backends.cudnn.declaration import CudnnPlan

    assert CudnnPlan(engine="49:TILE_SIZE=5", plan_name="eng49_k0=43_k2=5").pin == "eng49_k0=43_k2=5"
    assert CudnnPlan(engine="49:TILE_SIZE=5", plan_name="p").pin == "49:TILE_SIZE=5"
    assert CudnnPlan(engine="49:TILE_SIZE=5").pin == "49:TILE_SIZE=5"


def test_engine_specs_round_trip_and_pins_resolve() -> None:
    e = Engine(index=3, engine_id=34, knobs={"TILE_SIZE": 3, "SPLIT_K_BUF": 0})
    assert e.spec == "34:SPLIT_K_BUF=0,TILE_SIZE=3"
    assert parse_spec(e.spec) == (34, {"SPLIT_K_BUF": 0, "TILE_SIZE": 3})
    assert parse_spec("7") == (7, {})
    for bad in ("", "eng34", "34:TILE", "34:TILE=x"):
        with pytest.raises(engine_choice.EngineError):
            parse_spec(bad)
    pins = {"conv/train/052/fp32/bwd_filter": "34", "*": "7"}
    assert pin_for(pins, "conv/train/052/fp32", "bwd_filter") == "34"
    assert pin_for(pins, "conv/train/052/fp32", "fwd") == "7"
    assert pin_for({}, "conv/train/052/fp32", "fwd") is None


class _FakeCuda:
    """Stands for the run's GPU (CudaDevice) where none is."""

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def facts(self) -> dict:
        return {"kind": "fake"}

    def versions(self) -> dict:
        return {}


def _nvidia(monkeypatch: pytest.MonkeyPatch, bindings: bool):
    from deepbench.kernels.backends.nvidia import backend as nvidia

    monkeypatch.setattr(nvidia, "CudaDevice", lambda settings: _FakeCuda())
    if bindings:
        monkeypatch.setattr(native, "load_binding", lambda module, package, hint: (types.ModuleType(module), ""))
    else:
        monkeypatch.setattr(
            native, "load_binding", lambda module, package, hint: (None, f"{package} is not installed; {hint}")
        )
    return nvidia.NvidiaBackend(Settings(device="cpu"))


def test_each_operation_goes_to_its_own_library(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _nvidia(monkeypatch, bindings=True)
    kernels = {op: select("inference-server", [op])[0] for op in ("gemm", "conv", "rnn", "sparse_gemm")}
    assert backend.backend_for(kernels["gemm"], Precision.INT8) == "cublas"
    assert backend.backend_for(kernels["conv"], Precision.INT8) == "cudnn"
    assert backend.backend_for(kernels["sparse_gemm"], Precision.FP32) == "cusparse"
    assert backend.backend_for(kernels["sparse_gemm"], Precision.INT8) == "torch"  # cuSPARSE here: fp32/fp16/bf16
    assert backend.backend_for(kernels["rnn"], Precision.FP16) == "torch"
    assert backend.backend_for(select("train", ["all_reduce"])[0], Precision.FP32) == "torch"


def test_without_the_bindings_pytorch_runs_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _nvidia(monkeypatch, bindings=False)
    gemm = select("smoke", ["gemm"])[0]
    assert backend.backend_for(gemm, Precision.FP32) == "torch"
    _, why = backend._choose(gemm, Precision.FP32)
    assert "nvmath-python is not installed" in why and "deepbench[nvidia]" in why
    assert "torch (" in backend.device_facts()["backends"]["gemm"]


@pytest.mark.skipif(HAS_NVMATH, reason="nvmath-python is installed here: the backend would need a GPU instead")
@pytest.mark.parametrize("backend,op", [("cublas", "gemm"), ("cudnn", "conv"), ("cusparse", "sparse_gemm")])
def test_a_forced_native_backend_without_its_package_says_what_to_install(
    tmp_path: Path, backend: str, op: str
) -> None:
    suite = "inference-server" if op == "sparse_gemm" else "smoke"
    out = tmp_path / "run"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--backend",
        backend,
        "--suite",
        suite,
        "--ops",
        op,
        "--limit",
        "1",
        "--fast",
        "--precision",
        "fp32",
        "--out",
        str(out),
        "--quiet",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert records and all(r["status"] == "unsupported" for r in records)
    assert all("deepbench[nvidia]" in r["reason"] and r["backend"] == backend for r in records)


def test_server_suite_runs_deepbenchs_precisions_per_operation() -> None:
    from deepbench.runner.launch.running.planning import default_precisions, plan_items
    from deepbench.runner.platforms import get_platform

    nvidia = get_platform("nvidia")
    kernels = [select("inference-server", [op])[0] for op in ("gemm", "conv", "rnn", "sparse_gemm")]
    items = {(i.kernel.op, i.precision) for i in plan_items(kernels, None, nvidia)}
    assert items == {
        ("gemm", "int8"),
        ("gemm", "fp16"),
        ("conv", "int8"),
        ("conv", "fp16"),
        ("rnn", "fp32"),
        ("rnn", "fp16"),
        ("sparse_gemm", "fp32"),
        ("sparse_gemm", "fp16"),
    }
    recorded = default_precisions(kernels, nvidia)
    assert recorded["inference_server/rnn"] == ("fp32", "fp16")
    # a plan's recorded defaults win over the platform's (a checker re-deriving an older plan)
    old = dict.fromkeys(recorded, ("fp16", "int8"))
    assert {(i.kernel.op, i.precision) for i in plan_items(kernels, None, nvidia, old)} == {
        (op, p) for op in ("gemm", "conv", "rnn", "sparse_gemm") for p in ("fp16", "int8")
    }


def test_bad_engine_pins_and_pad_modes_are_usage_errors(tmp_path: Path) -> None:
    for args in (["--cudnn-engine", "engine34"], ["--pad", "sometimes"]):
        proc = run_cli("deepbench-run", "--local", "--suite", "smoke", "--out", str(tmp_path / "x"), *args, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "x" / "results.jsonl").exists()


def test_pad_both_reports_the_alignment_penalty(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "run"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "train",
        "--ops",
        "gemm",
        "--where",
        "m=35",
        "--limit",
        "1",
        "--precision",
        "fp16",
        "--fast",
        "--pad",
        "both",
        "--backend",
        "torch",  # PyTorch pads the listed shape (MKL, as DeepBench's Intel code, pads only leading dimensions)
        "--out",
        str(out),
        "--quiet",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert record["padding"]  # 35 is off the multiple of 8
    unpadded = record["info"]["unpadded"]
    assert math.isclose(
        record["info"]["alignment_penalty"], unpadded["time_us"]["median"] / record["time_us"]["median"]
    )
    assert "raw/padded" in proc.stdout


def test_contenders_are_timed_again_before_the_margin_decides() -> None:
    """A first figure that makes rank 1 look 5% faster is re-timed: the second, longer figures say
    the two are equal, so cuDNN's ranking decides; far-off candidates are never re-timed."""
    es = _engines(3)
    first = {0: 10.5, 1: 10.0, 2: 30.0}
    again = {0: 10.0, 1: 10.05}
    refined = []

    def refine(e: Engine) -> float:
        refined.append(e.index)
        return again[e.index]

    choice = choose(es, lambda e, _: first[e.index], lambda e: _check(True), refine=refine)
    assert choice.chosen.index == 0 and sorted(refined) == [0, 1]
    row = next(r for r in choice.table if r["engine"] == es[0].spec)
    assert row["first_us"] == 10.5 and row["quick_us"] == 10.0


def test_the_nvidia_backends_delegates_are_the_ones_the_checker_accepts() -> None:
    from deepbench.kernels.backends import result_backends
    from deepbench.kernels.backends.nvidia.declaration import NVIDIA

    assert set(result_backends("nvidia")) == {"nvidia", *NVIDIA.serves.values(), "torch"}
    assert result_backends("nvidia")[0] == "nvidia" and result_backends("torch") == ("torch",)


@pytest.mark.skipif(has_cuda(), reason="a GPU is here: the race would run (tests/test_gpu_native.py races apart)")
def test_the_race_apart_answers_from_a_process_of_its_own_and_starts_again_when_it_is_gone() -> None:
    """cudnn/race_apart.py: the child answers every kernel (here, without a GPU or the frontend, with why
    it cannot race); a child gone between kernels is replaced; close() ends it."""
    import os
    import signal

    from deepbench.kernels.backends.contract.base import Unsupported
    from deepbench.kernels.backends.cudnn.race_apart import RaceApart
    from deepbench.kernels.catalog import by_id
    from deepbench.kernels.padding import PadMode

    race = RaceApart(Settings(device="cuda"))
    kernel = by_id()["conv/train/000"]
    try:
        with pytest.raises((Unsupported, RuntimeError), match=r"cudnn|CUDA"):
            race.choices(kernel, Precision.FP16, PadMode.DEEPBENCH, ("NHWC", "test"))
        first = race.pid
        assert first is not None and first != os.getpid()
        os.kill(first, signal.SIGKILL)
        race._process.wait()  # the kill has landed before the next kernel
        with pytest.raises((Unsupported, RuntimeError), match=r"cudnn|CUDA"):
            race.choices(kernel, Precision.FP16, PadMode.DEEPBENCH, ("NHWC", "test"))
        assert race.pid not in (None, first)
    finally:
        race.close()
    assert race.pid is None
