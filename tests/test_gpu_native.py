"""GPU tests of the backends that call NVIDIA's libraries directly (cuBLAS, cuDNN, cuSPARSE):
each runs DeepBench's problem, its check passes, and a wrong result fails the check. Skipped
(with the reason) without a GPU or without the bindings (pip install 'deepbench[nvidia]')."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import requires_gpu

pytestmark = [
    requires_gpu,
    pytest.mark.skipif(
        importlib.util.find_spec("nvmath") is None or importlib.util.find_spec("cudnn") is None,
        reason="needs nvmath-python and nvidia-cudnn-frontend (pip install 'deepbench[nvidia]')",
    ),
]

QUICK = dict(device="cuda", min_samples=5, time_cap_s=0.2, warm_up_s=0.0)


@pytest.fixture(scope="module")
def cuda():
    from deepbench.kernels.backends.gpu.cuda.device import CudaDevice
    from deepbench.kernels.results import Settings

    device = CudaDevice(Settings(**QUICK))
    device._ceilings = {}  # no roofline: the ceilings take seconds to measure
    return device


_OPEN: list = []  # backends a test made: closed after it (cuDNN's race process ends with its backend)


@pytest.fixture(autouse=True)
def _close_backends():
    yield
    while _OPEN:
        _OPEN.pop().close()


def _backend(name: str, cuda, **settings):
    from deepbench.kernels.backends import load_backend
    from deepbench.kernels.results import Settings

    backend = load_backend(name, Settings(**{**QUICK, **settings}), cuda=cuda)
    _OPEN.append(backend)
    return backend


def _run(backend, kernel, precision: str):
    from deepbench.kernels.harness.execute import run_item
    from deepbench.kernels.results import PlanItem

    return run_item(backend, PlanItem(kernel=kernel, precision=precision), backend.settings)


def _wrong_result_fails(backend, kernel, precision: str) -> None:
    """Run the kernel's first part, spoil its output (every element: the conv check samples 48),
    and the check must fail."""
    from deepbench.kernels.precision import Precision

    part = backend.prepare(kernel, Precision(precision)).parts[0]
    part.run()
    assert part.check().passed
    part.output.add_(3)
    assert not part.check().passed
    backend.release()


def _gemm(m, n, k, a_t, b_t):
    from deepbench.kernels.catalog import GemmKernel

    return GemmKernel(set="inference_server", index=0, m=m, n=n, k=k, a_t=a_t, b_t=b_t)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "fp16acc16", "bf16", "int8"])
@pytest.mark.parametrize("layout", [(False, False), (True, False), (False, True), (True, True)])
def test_cublas_gemm_ex_every_precision_and_layout(cuda, precision: str, layout) -> None:
    # cublasGemmEx takes int8 only with lda and ldb multiples of 4 (DeepBench's server set is): n = 8 for int8
    n, k = (8, 2564) if precision == "int8" else (7, 2568)
    r = _run(_backend("cublas", cuda), _gemm(35, n, k, *layout), precision)
    assert r.status.value == "ok", r.reason
    call = r.parts[0].info["blas_call"]
    assert call["lda"] == (call["k"] if layout[0] else call["m"]) and call["ldc"] == call["m"]
    if precision == "int8":
        assert r.padding == {"m": 36} and call["n"] == 8  # DeepBench's int8 rule only: m to 4, n as listed
        assert r.check.method in ("exact-int", "freivalds-exact")
    elif precision in ("fp16", "fp16acc16", "bf16"):
        assert r.padding["m"] == 40


def test_cublas_fp16acc16_is_deepbench_half_call(cuda) -> None:
    """fp16acc16 makes gemm_bench.cu's half call (fp16 compute, default math) and records it; fp16
    keeps fp32 accumulate on its own strict handle; the PyTorch backend refuses fp16acc16."""
    kernel = _gemm(64, 48, 128, False, True)
    cublas = _backend("cublas", cuda)
    half16, half32 = _run(cublas, kernel, "fp16acc16"), _run(cublas, kernel, "fp16")
    assert half16.status.value == "ok" and half32.status.value == "ok", (half16.reason, half32.reason)
    assert half16.precision.accumulate == "float16" and half32.precision.accumulate == "float32"
    assert half16.parts[0].info["types"] == "A/B CUDA_R_16F, C CUDA_R_16F, CUBLAS_COMPUTE_16F"
    assert half16.parts[0].info["math_mode"] == "CUBLAS_DEFAULT_MATH"
    assert "DISALLOW_REDUCED_PRECISION_REDUCTION" in half32.parts[0].info["math_mode"]
    refused = _run(_backend("torch", cuda), kernel, "fp16acc16")
    assert refused.status.value == "unsupported" and "torch backend does not make" in refused.reason


def test_cublas_refusal_is_unsupported(cuda) -> None:
    r = _run(_backend("cublas", cuda), _gemm(36, 7, 2561, False, False), "int8")  # ldb = k = 2561: not a multiple of 4
    assert r.status.value == "unsupported" and "NOT_SUPPORTED" in r.reason


def test_cublas_int8_at_n_1(cuda) -> None:
    r = _run(_backend("cublas", cuda), _gemm(7680, 1, 2560, False, False), "int8")
    assert r.status.value == "ok", r.reason
    assert r.parts[0].info["blas_call"]["n"] == 1


def test_cublas_fp8_tn(cuda) -> None:
    r = _run(_backend("cublas", cuda), _gemm(64, 48, 128, True, False), "fp8")
    assert r.status.value in ("ok", "unsupported"), r.reason


@pytest.mark.parametrize("precision", ["fp32", "fp16", "fp16acc16", "int8"])
def test_cublas_wrong_result_fails(cuda, precision: str) -> None:
    _wrong_result_fails(_backend("cublas", cuda), _gemm(64, 32, 128, False, True), precision)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_cudnn_conv_directions_on_a_recorded_engine(cuda, precision: str) -> None:
    from deepbench.kernels.catalog import by_id

    r = _run(_backend("cudnn", cuda), by_id()["conv/train/000"], precision)
    assert r.status.value == "ok", r.reason
    assert [p.direction for p in r.parts] == ["fwd", "bwd_data", "bwd_filter"]
    for p in r.parts:
        record = p.info["cudnn"]
        assert record["engine"] and record["candidates"] and p.check.method == "sampled-fp64"
        assert sum(c["status"] == "chosen" for c in record["candidates"]) == 1


def test_cudnn_int8_forward_exact_and_padded(cuda) -> None:
    from deepbench.kernels.catalog import by_id

    kernel = next(k for k in by_id().values() if k.op == "conv" and k.set == "inference_server" and k.c % 32)
    r = _run(_backend("cudnn", cuda), kernel, "int8")
    assert r.status.value == "ok", r.reason
    assert [p.direction for p in r.parts] == ["fwd"] and r.padding["c"] % 32 == 0
    assert r.check.error == 0.0 and r.parts[0].info["layout"] == "NHWC"


@pytest.mark.parametrize(("precision", "layout"), [("fp32", "NCHW"), ("fp16", "NHWC"), ("bf16", "NHWC")])
def test_cudnn_runs_deepbench_layouts_and_both_times_the_other_beside(cuda, precision: str, layout: str) -> None:
    """By default each precision runs in DeepBench's layout (conv_bench.cu); --layout both times the
    other layout beside it, every direction checked, and the layout penalty reads from the record."""
    from deepbench.kernels.backends.contract.layout_info import LayoutInfo
    from deepbench.kernels.catalog import by_id

    kernel = by_id()["conv/train/000"]
    r = _run(_backend("cudnn", cuda), kernel, precision)
    assert r.status.value == "ok", r.reason
    assert {p.info["layout"] for p in r.parts} == {layout} and "other_layout" not in r.info
    both = _run(_backend("cudnn", cuda, backend_options={"cudnn": {"layout": "both"}}), kernel, precision)
    assert both.status.value == "ok", both.reason
    other = LayoutInfo.model_validate(both.info)
    assert other.other_layout.layout != layout and set(other.other_layout.parts) == {p.direction for p in both.parts}
    assert set(other.penalties(both.parts)) == {"fwd", "bwd_data", "bwd_filter"}


def test_cudnn_inference_convolutions_time_the_forward_pass_only(cuda) -> None:
    from deepbench.kernels.catalog import by_id

    r = _run(_backend("cudnn", cuda), by_id()["conv/inference_server/000"], "fp16")
    assert r.status.value == "ok", r.reason
    assert [p.direction for p in r.parts] == ["fwd"] and r.info["directions"] == ["fwd"]


def test_cudnn_pinned_engine_reruns_that_engine(cuda) -> None:
    from deepbench.kernels.catalog import by_id

    kernel = by_id()["conv/train/000"]
    first = _run(_backend("cudnn", cuda), kernel, "fp16")
    engine = first.parts[0].info["cudnn"]["engine"]
    pinned = _run(
        _backend("cudnn", cuda, backend_options={"cudnn": {"engines": {f"{first.id}/fwd": engine}}}), kernel, "fp16"
    )
    assert pinned.status.value == "ok", pinned.reason
    assert pinned.parts[0].info["cudnn"]["engine"] == engine
    assert pinned.parts[0].info["cudnn"]["chosen_by"].startswith("pinned")


def test_cudnn_races_apart_and_measures_the_plan_chosen_there(cuda) -> None:
    """By default the candidates run in a process of their own (race_apart.py): each direction's record
    comes from there and names the plan this process then built and measured; inline races here."""
    import os

    from deepbench.kernels.backends.cudnn.conv import RACED_APART, RACED_HERE
    from deepbench.kernels.catalog import by_id

    # inference_server/006's shape, trained (inference is forward only): its backward-data candidates
    # put a process in the slow state
    kernel = by_id()["conv/inference_server/006"].model_copy(update={"set": "train"})
    apart = _backend("cudnn", cuda)
    r = _run(apart, kernel, "fp16")
    assert r.status.value == "ok", r.reason
    assert apart.race_apart.pid not in (None, os.getpid())
    for p in r.parts:
        record = p.info["cudnn"]
        assert record["raced_in"] == RACED_APART and len(record["candidates"]) > 1
        chosen = [c for c in record["candidates"] if c["status"] == "chosen"]
        assert [c["plan_name"] for c in chosen] == [record["plan_name"]]
    apart.close()
    assert apart.race_apart.pid is None
    inline = _run(_backend("cudnn", cuda, backend_options={"cudnn": {"engine_race": "inline"}}), kernel, "fp16")
    assert inline.status.value == "ok", inline.reason
    assert all(p.info["cudnn"]["raced_in"] == RACED_HERE for p in inline.parts)


def test_cudnn_wider_race_never_chooses_a_planted_wrong_candidate_and_counts_its_search(cuda, monkeypatch) -> None:
    """The race over every configuration (search.py): the first candidate each direction checks (its
    fastest) is made to fail its check, so it is never chosen and counts as a wrong output; the census
    says how many configurations existed, were built and raced, the winner's family is named."""
    from deepbench.kernels.backends.cudnn import conv
    from deepbench.kernels.catalog import by_id

    planted: dict[str, str] = {}
    real = conv.Race.check_engine

    def check(race: conv.Race, e):
        c = real(race, e)
        if race.direction not in planted:
            planted[race.direction] = e.name
            return c.model_copy(update={"passed": False, "error": 1.0})
        return c

    monkeypatch.setattr(conv.Race, "check_engine", check)
    backend = _backend("cudnn", cuda, backend_options={"cudnn": {"engine_race": "inline"}})
    r = _run(backend, by_id()["conv/train/000"], "fp32")
    assert r.status.value == "ok", r.reason
    for p in r.parts:
        record = p.info["cudnn"]
        assert record["plan_name"] != planted[p.direction]
        census = record["search"]
        assert census["enumerated"] >= census["tried"] >= census["built"] >= census["raced"] > 1
        assert census["engines"] >= census["engines_for_graph"] > 1
        assert census["rejected"]["wrong_output"] >= 1
        assert census["over_budget"] == 0 or census["budget_exhausted"]
        assert record["family"] and "TENSOR_CORE" not in record["numerical_notes"]  # fp32 stays fp32


def test_cudnn_plan_from_the_enumeration_is_found_by_its_name(cuda) -> None:
    """A plan the heuristics do not offer (an engine's default or knob-grid configuration) is pinned by
    its name as a heuristics plan is."""
    from deepbench.kernels.backends.cudnn import conv
    from deepbench.kernels.backends.cudnn.engine_choice import Budget
    from deepbench.kernels.catalog import by_id
    from deepbench.kernels.precision import Precision

    kernel = by_id()["conv/train/000"]
    backend = _backend("cudnn", cuda, backend_options={"cudnn": {"engine_race": "inline"}})
    listing: list[conv.Race] = []
    conv.prepare(backend, kernel, Precision.FP16, listing=listing)
    race = listing[0]
    found = race.search(False, Budget(30.0))
    enumerated = next(e for e in found.candidates() if e.source == "enumeration")
    pinned = _run(
        _backend("cudnn", cuda, backend_options={"cudnn": {"engines": {f"{kernel.id}/fp16/fwd": enumerated.name}}}),
        kernel,
        "fp16",
    )
    assert pinned.status.value == "ok", pinned.reason
    assert pinned.parts[0].info["cudnn"]["plan_name"] == enumerated.name


# Two short measurements of one plan agree far closer than this; the plan re-created from the frontend's
# knob list (engine 49 without its split-K) ran 4-12x slower than the one measured.
SAME_PLAN_RATIO = 1.5


def test_cudnn_plan_name_pin_reruns_that_very_plan(cuda) -> None:
    """conv/inference_server/015 in fp16 (3 channels padded to 8): its bwd_filter plans carry knobs
    cudnn-frontend's knob list leaves out. Pinned by their names, every direction re-runs the chosen
    plan, as fast as when it was chosen."""
    from deepbench.kernels.catalog import by_id

    kernel = by_id()["conv/inference_server/015"].model_copy(update={"set": "train"})  # with its backward
    first = _run(_backend("cudnn", cuda), kernel, "fp16")
    assert first.status.value == "ok", first.reason
    pins = {f"{first.id}/{p.direction}": p.info["cudnn"]["plan_name"] for p in first.parts}
    again = _run(_backend("cudnn", cuda, backend_options={"cudnn": {"engines": pins}}), kernel, "fp16")
    assert again.status.value == "ok", again.reason
    for chosen, pinned in zip(first.parts, again.parts, strict=True):
        assert pinned.info["cudnn"]["plan_name"] == chosen.info["cudnn"]["plan_name"]
        assert pinned.info["cudnn"]["chosen_by"].startswith("pinned")
        ratio = pinned.measurement.stats.median / chosen.measurement.stats.median
        assert 1 / SAME_PLAN_RATIO < ratio < SAME_PLAN_RATIO, (chosen.direction, pinned.info["cudnn"]["plan_name"])


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_cudnn_wrong_result_fails(cuda, precision: str) -> None:
    from deepbench.kernels.catalog import by_id

    _wrong_result_fails(_backend("cudnn", cuda), by_id()["conv/inference_server/000"], precision)


@pytest.mark.parametrize("n", [1, 16])
def test_cusparse_spmm_beside_the_dense_gemm(cuda, n: int) -> None:
    from deepbench.kernels.catalog import SparseGemmKernel

    kernel = SparseGemmKernel(set="inference_server", index=0, m=512, n=n, k=1024, a_t=False, b_t=False, sparsity=0.9)
    r = _run(_backend("cusparse", cuda), kernel, "fp32")
    assert r.status.value == "ok", r.reason
    assert r.info["dense_check"]["passed"] and r.info["speedup_vs_dense"] > 0
    assert r.parts[0].info["call"].startswith("cusparseSpMV" if n == 1 else "cusparseSpMM")


def test_cusparse_wrong_result_fails(cuda) -> None:
    from deepbench.kernels.catalog import SparseGemmKernel

    kernel = SparseGemmKernel(set="inference_server", index=0, m=256, n=8, k=512, a_t=False, b_t=False, sparsity=0.9)
    _wrong_result_fails(_backend("cusparse", cuda), kernel, "fp32")


def test_nvidia_backend_names_the_library_of_each_kernel(tmp_path) -> None:
    import json

    from tests.conftest import run_cli

    out = tmp_path / "run"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--platform",
        "nvidia",
        "--suite",
        "inference-server",
        "--ops",
        "gemm,conv,sparse_gemm,rnn",
        "--limit",
        "1",
        "--fast",
        "--warm-up",
        "0",
        "--out",
        str(out),
        "--quiet",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    backends = {(r["op"], r["precision"]["name"]): r["backend"] for r in records}
    assert backends[("gemm", "int8")] == "cublas" and backends[("conv", "int8")] == "cudnn"
    assert backends[("sparse_gemm", "fp32")] == "cusparse" and backends[("rnn", "fp32")] == "torch"
    assert all(r["status"] == "ok" for r in records), [(r["id"], r["reason"]) for r in records if r["status"] != "ok"]


def _sparse24(m: int, n: int, k: int):
    from deepbench.kernels.catalog import Sparse24GemmKernel

    return Sparse24GemmKernel(set="sparse_2of4", index=0, m=m, n=n, k=k, a_t=False, b_t=False)


@pytest.mark.parametrize("precision", ["fp16", "int8"])
@pytest.mark.parametrize("shape", [(7680, 1, 2560), (7860, 4, 2560), (1024, 256, 512)], ids=["n1", "m7860", "square"])
def test_cusparselt_2of4_beside_the_dense_gemm(cuda, precision: str, shape) -> None:
    r = _run(_backend("cusparselt", cuda), _sparse24(*shape), precision)
    assert r.status.value == "ok", r.reason
    info = r.parts[0].info
    assert info["call"] == "cusparseLtMatmul" and isinstance(info["algorithm"]["config_id"], int), info
    assert r.info["dense_check"]["passed"] and r.info["speedup_vs_dense"] > 0
    assert info["layout"]["n"] % (8 if precision == "fp16" else 16) == 0 and info["layout"]["m"] >= shape[0]
    if precision == "int8":
        assert r.check.method in ("exact-int", "freivalds-exact") and r.check.error == 0.0
    assert r.tflops == pytest.approx(r.parts[0].flops / r.time_us.median / 1e6)


def test_cusparselt_fp8_runs_or_says_why(cuda) -> None:
    r = _run(_backend("cusparselt", cuda), _sparse24(256, 64, 512), "fp8")
    assert r.status.value in ("ok", "unsupported"), r.reason


@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_cusparselt_wrong_result_fails(cuda, precision: str) -> None:
    _wrong_result_fails(_backend("cusparselt", cuda), _sparse24(256, 32, 512), precision)
