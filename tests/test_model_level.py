"""Whole-model runs (op "model", kernels/model_kernel.py): model suites end with the whole model;
the torch and onnxruntime backends run it on the CPU with its check passed and write the
throughput; backends that cannot run it say why; and runner/analysis/model_level.py's whole model against
operator sum is the arithmetic of the results it is given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepbench.kernels.catalog import GemmKernel
from deepbench.kernels.harness.execute import run_item
from deepbench.kernels.model_kernel import MODEL_TOLERANCE, ModelKernel
from deepbench.kernels.models.extract import extract
from deepbench.kernels.precision import PRECISIONS, Precision
from deepbench.kernels.results import KernelResult, PlanItem, Settings, Status
from deepbench.kernels.results_file import read_results
from deepbench.kernels.suites import parse_where, select
from deepbench.runner.analysis.model_level import model_levels
from deepbench.runner.launch.running.planning import plan_items
from deepbench.runner.platforms import get_platform

from .conftest import REPO, requires_gpu, run_cli
from .reports_synthetic import T0, result

FAST = ("--fast", "--time-cap", "0.05", "--threads", "1")


def whole(results: list[KernelResult], precision: str) -> KernelResult:
    (r,) = [r for r in results if r.kernel.op == "model" and r.precision.name.value == precision]
    return r


def fwd_us(r: KernelResult) -> float:
    return next(p.measurement.stats.median for p in r.parts if p.direction == "fwd")


# ----- the suites ------------------------------------------------------------------------------
def test_model_suites_end_with_the_whole_model(tmp_path: Path) -> None:
    for name, batch, seq in (("resnet50", 1, None), ("bert-base", 2, 128)):
        kernels = select(f"model:{name}", batch=batch)
        k = kernels[-1]
        ds = extract(name, batch=batch)
        assert isinstance(k, ModelKernel) and [x for x in kernels if x.op == "model"] == [k]
        assert (k.id, k.model, k.application, k.batch, k.seq) == ("model/model/000", name, name, batch, seq)
        assert k.fwd_flops == round(ds.total_flops()) and k.parameters == ds.parameters
        assert k.min_bytes("fwd", Precision.FP16) == 2 * ds.parameters  # the weights, read once
    # --where selects it by name and sequence length (k: bert-base's, batch 2)
    assert select("model:bert-base", where=parse_where(["model=bert-base", "seq=128"]), batch=2) == [k]
    # a dataset file of a registered model gets it too; one of a model this tool cannot build does not
    ds = extract("resnet50", batch=1)
    ds.save(tmp_path / "r.json")
    ds.model_copy(update={"model": "toy"}).save(tmp_path / "toy.json")
    assert select(f"model:{tmp_path / 'r.json'}")[-1] == select("model:resnet50", batch=1)[-1]
    assert not any(k.op == "model" for k in select(f"model:{tmp_path / 'toy.json'}"))
    # a vision model's unset seq matches no condition on it (and raises nothing)
    assert select("model:resnet50", where=parse_where(["seq<=128"]), batch=1) == []
    # the record round-trips through the result model (op, set and params at the top level)
    item = PlanItem(kernel=k, precision="fp32")
    assert PlanItem.model_validate_json(item.model_dump_json()) == item


def test_gpu_model_suites_plan_the_whole_model_per_precision() -> None:
    """What the lead runs on the H200 (--platform nvidia --batch 32 --precision fp32,fp16)."""
    for name in ("resnet50", "bert-base"):
        items = plan_items(select(f"model:{name}", batch=32), ["fp32", "fp16"], get_platform("nvidia"))
        assert [i.id for i in items if i.kernel.op == "model"] == ["model/model/000/fp32", "model/model/000/fp16"]


# ----- runs on this CPU ------------------------------------------------------------------------
@pytest.mark.slow
def test_torch_runs_the_whole_model_beside_its_operators(tmp_path: Path) -> None:
    out = tmp_path / "torch"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "model:resnet50",
        "--batch",
        "1",
        "--ops",
        "model,pooling",
        "--precision",
        "fp32,int8",
        *FAST,
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Whole model" in proc.stdout and "items/s" in proc.stdout
    results = read_results(out / "results.jsonl")
    r = whole(results, "fp32")
    assert r.status is Status.OK and r.check.passed and r.check.method == "reference-fp64-model"
    assert 0 <= r.check.error <= MODEL_TOLERANCE[Precision.FP32]
    assert r.info["throughput_per_s"] == pytest.approx(1e6 / r.time_us.median)
    assert r.parts[0].info["parameters"] == r.kernel.parameters and r.parts[0].flops == r.kernel.fwd_flops
    assert r.tflops == pytest.approx(r.kernel.fwd_flops / r.time_us.median / 1e6)
    int8 = whole(results, "int8")
    assert int8.status is Status.UNSUPPORTED and "quantized" in int8.reason
    # the model level of this very run, recomputed from the records
    levels = {lv.precision: lv for lv in model_levels(results)}
    fp32 = levels["fp32"]
    pools = [x for x in results if x.kernel.op == "pooling" and x.precision.name.value == "fp32"]
    assert len(pools) == 2 and all(x.status is Status.OK for x in pools)
    op_sum = sum(fwd_us(x) * x.kernel.count for x in pools)
    assert (fp32.whole_us, fp32.operator_sum_us, fp32.operators_measured) == (
        pytest.approx(fwd_us(r)),
        pytest.approx(op_sum),
        2,
    )
    assert fp32.ratio == pytest.approx(op_sum / fwd_us(r)) and fp32.throughput_per_s == pytest.approx(1e6 / fwd_us(r))
    assert (fp32.batch, fp32.seq, fp32.whole_status) == (1, None, "ok")
    assert levels["int8"].whole_us is None and levels["int8"].ratio is None and levels["int8"].throughput_per_s is None
    assert levels["int8"].whole_status == "unsupported" and levels["int8"].operators_not_measured == 2


@pytest.mark.slow
def test_onnxruntime_runs_the_exported_whole_model(tmp_path: Path) -> None:
    out = tmp_path / "ort"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "model:resnet50",
        "--batch",
        "1",
        "--ops",
        "model",
        "--backend",
        "onnxruntime",
        "--precision",
        "fp32,fp16,bf16",
        *FAST,
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = read_results(out / "results.jsonl")
    for prec in ("fp32", "fp16"):
        r = whole(results, prec)
        assert r.status is Status.OK and r.check.passed and r.backend == "onnxruntime", r.reason
        assert r.check.error <= MODEL_TOLERANCE[Precision(prec)]
        assert r.info["throughput_per_s"] == pytest.approx(1e6 / r.time_us.median)
        assert "torch.onnx" in r.parts[0].info["exporter"] and r.parts[0].info["providers"]
    bf16 = whole(results, "bf16")
    assert bf16.status is Status.UNSUPPORTED and "bfloat16" in bf16.reason


@pytest.mark.slow
def test_backends_without_whole_models_say_why() -> None:
    """TFLite cannot convert a model here, and onnxruntime without PyTorch cannot export one: run in
    a process where PyTorch cannot be imported, as in an image without it."""
    pytest.importorskip("ai_edge_litert", reason="needs LiteRT (pip install ai-edge-litert; CI installs it)")
    kernel = select("model:resnet50", ["model"], batch=1)[0]
    script = (
        "import json, sys\n"
        "sys.modules['torch'] = None  # import torch raises ImportError: an environment without PyTorch\n"
        "from deepbench.kernels.backends import load_backend\n"
        "from deepbench.kernels.harness.execute import run_item\n"
        "from deepbench.kernels.results import PlanItem, Settings\n"
        "item = PlanItem.model_validate_json(sys.argv[1])\n"
        "for name in ('tflite', 'onnxruntime'):\n"
        "    r = run_item(load_backend(name, Settings(threads=1)), item, Settings(threads=1))\n"
        "    print(json.dumps({'backend': name, 'status': r.status.value, 'reason': r.reason}))\n"
    )
    item = PlanItem(kernel=kernel, precision="fp32").model_dump_json()
    proc = subprocess.run([sys.executable, "-c", script, item], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {d["backend"]: d for d in map(json.loads, proc.stdout.splitlines())}
    assert got["tflite"]["status"] == "unsupported" and "litert-torch" in got["tflite"]["reason"]
    assert got["onnxruntime"]["status"] == "unsupported" and "needs PyTorch" in got["onnxruntime"]["reason"]


# ----- the arithmetic --------------------------------------------------------------------------
def test_model_level_is_the_arithmetic_of_its_results() -> None:
    gemms = [
        GemmKernel(set="model", index=i, application="toy", count=c, m=m, n=64, k=512, a_t=False, b_t=False)
        for i, (m, c) in enumerate(((1024, 2), (2048, 1)))
    ]
    toy = ModelKernel(
        set="model",
        index=0,
        application="toy",
        count=1,
        model="toy",
        batch=8,
        seq=16,
        parameters=1000,
        fwd_flops=round(4 * sum(g.flops() * g.count for g in gemms)),
    )
    fixed = lambda us: lambda direction: [us, us, us]  # noqa: E731
    results = [
        result(gemms[0], "fp32", fixed(100.0)),
        result(gemms[1], "fp32", fixed(150.0)),
        result(toy, "fp32", fixed(200.0)),
        result(gemms[0], "fp16", fixed(60.0)),
    ]
    unsupported = KernelResult(
        id="model/model/000/fp16",
        kernel=toy,
        precision=PRECISIONS[Precision.FP16],
        backend="synthetic",
        status=Status.UNSUPPORTED,
        reason="no fp16 here",
        started_at=T0,
        ended_at=T0,
    )
    levels = {lv.precision: lv for lv in model_levels([*results, unsupported])}
    fp32, fp16 = levels["fp32"], levels["fp16"]
    assert fp32.operator_sum_us == pytest.approx(2 * 100.0 + 150.0) and fp32.whole_us == pytest.approx(200.0)
    assert fp32.ratio == pytest.approx(350.0 / 200.0) and fp32.throughput_per_s == pytest.approx(8 / 200e-6)
    assert fp32.flops_covered == pytest.approx(0.25) and (fp32.batch, fp32.seq) == (8, 16)
    assert fp32.as_dict()["ratio"] == fp32.ratio and fp32.operators_measured == 2
    assert fp16.operator_sum_us == pytest.approx(120.0) and fp16.whole_us is None and fp16.ratio is None
    assert (fp16.whole_status, fp16.whole_reason) == ("unsupported", "no fp16 here")
    # a run of operators alone has no whole model to set them against
    (alone,) = model_levels(results[:2])
    assert alone.whole_status == "not run" and alone.ratio is None and alone.operator_sum_us == pytest.approx(350.0)


# ----- on a GPU (the lead's H200 session runs these) ----------------------------------------------
@requires_gpu
@pytest.mark.parametrize("name", ["resnet50", "bert-base"])
def test_gpu_runs_the_whole_model(name: str) -> None:
    from deepbench.kernels.backends import load_backend

    settings = Settings(device="cuda", mode="fast", target_rel_precision=0.05, time_cap_s=0.2)
    backend = load_backend("torch", settings)
    kernel = select(f"model:{name}", ["model"], batch=4)[0]
    for prec in ("fp32", "tf32", "fp16", "bf16"):
        r = run_item(backend, PlanItem(kernel=kernel, precision=prec), settings)
        assert r.status is Status.OK and r.check.passed, (prec, r.reason, r.check)
        assert r.info["throughput_per_s"] == pytest.approx(4e6 / r.time_us.median)
        assert r.parts[0].measurement.method.startswith("cuda-"), r.parts[0].measurement.method
