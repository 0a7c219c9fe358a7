"""GPU tests: run where PyTorch sees an NVIDIA GPU, skip (with the reason) elsewhere."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, requires_gpu

pytestmark = requires_gpu


@pytest.fixture(scope="module")
def backend():
    from deepbench.kernels.backends.pytorch.backend import TorchBackend
    from deepbench.kernels.results import Settings

    return TorchBackend(Settings(device="cuda", verify_timing=True, kernel_time=True))


def _quick_backend(**settings):
    """A backend with short measurements and no ceilings (they take seconds), for tests of the timer's choice."""
    from deepbench.kernels.backends.pytorch.backend import TorchBackend
    from deepbench.kernels.results import Settings

    b = TorchBackend(Settings(device="cuda", min_samples=5, time_cap_s=0.2, **settings))
    b.cuda._ceilings = {}
    return b


def _run(backend, kernel_id: str, precision: str):
    from deepbench.kernels.catalog import by_id
    from deepbench.kernels.harness.execute import run_item
    from deepbench.kernels.results import PlanItem

    return run_item(backend, PlanItem(kernel=by_id()[kernel_id], precision=precision), backend.settings)


def test_device_facts_and_versions(backend) -> None:
    facts, versions = backend.device_facts(), backend.library_versions()
    assert facts["kind"] == "cuda" and facts["sm_count"] > 0 and facts["memory_bytes"] > 0
    assert {"torch", "cuda_runtime", "cudnn"} <= set(versions)


def test_ceilings_measured(backend) -> None:
    c = backend.ceilings()
    assert c["gbps_copy"] > 100 and c["tflops_fp16"] > c["tflops_fp32"] > 1


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16", "int8"])
def test_gemm_ok_timed_and_profiled(backend, precision) -> None:
    """1760x16x1760: 4-16 us a call except in int8 (padded, over 20 us on an H100), so kernel time times it
    by CUPTI, the kernels' own time, with the events' period of the same replays beside it."""
    from deepbench.kernels.timing.cupti_kernel import KERNEL_TIMED_BELOW_US, METHOD_KERNELS
    from deepbench.kernels.timing.graph_events import METHOD_GRAPH

    r = _run(backend, "gemm/train/000", precision)
    assert r.status.value == "ok", r.reason
    part = r.parts[0]
    m = part.measurement
    if precision != "int8":
        assert m.method == METHOD_KERNELS, part.info.get("kernel_timer")
    prof = part.info["profiler"]  # CUPTI's record of samples taken as the timed ones (whole replays), right after
    if m.method == METHOD_KERNELS:
        assert part.info["graph_events_us"] >= m.stats.median  # events count the gaps between calls
        assert 1 <= m.calls_per_sample <= prof["calls"]  # a sample: a chunk of a replay's calls
    else:
        assert m.method == METHOD_GRAPH and m.stats.median > 0.9 * KERNEL_TIMED_BELOW_US
        assert prof["calls"] == m.calls_per_sample
    assert prof["kernel_us"] > 0 and prof["kernels_per_call"] >= 1
    assert prof["samples"] >= 1 and prof["events_us"] > 0
    assert prof["kernel_us"] <= prof["period_us"] * 1.0001  # busy time fits in the sample's window
    assert 0.8 < prof["ratio"] < 1.5 and 0.8 < prof["timer_ratio"] < 1.5
    assert "pct_of_peak" in part.info["roofline"]


def test_long_gemm_timed_by_graph_events(backend) -> None:
    r = _run(backend, "gemm/train/048", "fp32")  # 5124x9124x2560, over 1 ms
    assert r.status.value == "ok", r.reason
    assert r.parts[0].measurement.method == "cuda-graph-events"
    assert 0.95 < r.parts[0].info["profiler"]["ratio"] < 1.05


@pytest.mark.parametrize("kernel_time, method", [(True, "cuda-graph-cupti"), (False, "cuda-graph-events")])
def test_short_gemm_timed_by_cupti_unless_kernel_time_is_off(kernel_time: bool, method: str) -> None:
    r = _run(_quick_backend(kernel_time=kernel_time), "gemm/train/000", "fp16")
    assert r.status.value == "ok" and r.parts[0].measurement.method == method, r.parts[0].info.get("kernel_timer")


@pytest.mark.parametrize("kernel_id", ["rnn/train/000", "rnn/train/012", "rnn/train/050"])  # vanilla, LSTM, GRU
def test_rnn_backward_replayed_from_a_graph(kernel_id: str) -> None:
    """cuDNN's RNN backward is captured like every operation (its forward made on the capture
    stream), not timed by eager launches, which CUPTI once attached slows."""
    r = _run(_quick_backend(), kernel_id, "fp16")
    assert r.status.value == "ok", r.reason
    bwd = next(p for p in r.parts if p.direction == "bwd")
    assert bwd.measurement.method in ("cuda-graph-events", "cuda-graph-cupti"), bwd.info.get("eager_reason")
    assert bwd.check.passed


def test_int8_padding_recorded(backend) -> None:
    from deepbench.kernels.catalog import by_id

    odd = next(k for k in by_id().values() if k.op == "gemm" and (k.m % 8 or k.k % 8 or k.n <= 16))
    r = _run(backend, odd.id, "int8")
    assert r.status.value == "ok", r.reason
    assert r.padding


def test_conv_and_rnn_ok(backend) -> None:
    for kid, prec in (("conv/train/000", "fp16"), ("rnn/train/000", "fp32")):
        r = _run(backend, kid, prec)
        assert r.status.value == "ok", f"{kid}: {r.reason}"


def test_fp32_transform_conv_checked_against_its_family_tolerance(backend) -> None:
    """conv/train/032 (5x5): cuDNN's find picks Winograd for backward-filter on Hopper."""
    r = _run(backend, "conv/train/032", "fp32")
    assert r.status.value == "ok", r.reason
    assert all(p.check.passed for p in r.parts)


def test_cold_mode_uses_flushed_events() -> None:
    r = _run(_quick_backend(cold=True), "gemm/train/000", "fp16")
    assert r.status.value == "ok" and r.parts[0].measurement.method == "cuda-events-cold"


def test_eager_fallback_after_a_failed_capture_leaves_the_gpu_usable() -> None:
    """A call that cannot be captured (a random draw, then a host sync) is timed eagerly, and the
    failed capture leaves torch's CUDA RNG usable: the next kernels' inputs are random draws."""
    import torch

    from deepbench.kernels.results import Settings
    from deepbench.kernels.timing.eager import METHOD_EAGER
    from deepbench.kernels.timing.strategy import sampler_for

    def uncapturable() -> float:
        return torch.randn(256, device="cuda").sum().item()

    sampler = sampler_for(uncapturable, Settings(device="cuda"), True, torch.device("cuda"))
    assert sampler.method == METHOD_EAGER
    assert sampler.notes["eager_reason"].startswith("graph capture failed"), sampler.notes
    assert sampler.take() > 0
    assert torch.isfinite(torch.randn(16, device="cuda")).all()


def test_a_run_captures_and_replays_on_its_one_work_stream() -> None:
    """A run's device makes its own stream torch's current one, graphs are captured on it (no side
    stream and no eager call first: the callers made theirs on this stream) and replayed there, and a
    part is measured so."""
    import torch

    from deepbench.kernels.timing.graph import capture
    from deepbench.kernels.timing.work_stream import capture_stream

    b = _quick_backend()
    work = torch.cuda.current_stream()
    assert work == b.cuda.stream and work != torch.cuda.default_stream()
    assert capture_stream() == work
    x = torch.ones(1024, device="cuda")
    graph = capture(lambda: x.mul_(2.0), 3)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.cuda.current_stream() == work and x[0].item() == 2.0**3  # the 3 captured calls, replayed once
    r = _run(b, "gemm/train/000", "fp16")
    assert r.status.value == "ok", r.reason


@pytest.mark.parametrize("min_sample_s", [1e-3, 1e-7])  # a graph of many short calls; one call per sample
def test_a_calibrated_graphs_warm_up_counts_every_call_the_gpu_ran(min_sample_s: float) -> None:
    """warmup_calls, recorded with every graph measurement, is the number of calls the GPU ran before
    the first sample (eager estimates, replays), counted on the device: each call adds one."""
    import torch

    from deepbench.kernels.timing.graph import calibrated_graph

    _quick_backend()  # the run's work stream, as in a run
    ran = torch.zeros(1, dtype=torch.int64, device="cuda")
    calibrated = calibrated_graph(lambda: ran.add_(1), min_sample_s)
    torch.cuda.synchronize()
    assert ran.item() == calibrated.warmup_calls > 0


SLOW_HOST_S = 2e-3  # the host time each call of the slow-host test spends before its launch
SPIN_S = 150e-6  # that call's kernel: a spin of about this long (over quick_us's EAGER_EXACT_US)


def test_quick_us_reads_the_gpu_not_a_slow_host() -> None:
    """An engine race on a slow host (an H100 whose host took 0.1-3 ms per cuDNN call put fast
    engines out of contest): a call that spends 2 ms on the host before launching a 150 us kernel
    reads the kernel's time, not the host's, and a rival 20% faster does not put it out of contest."""
    import time

    import torch

    from deepbench.kernels.backends.cudnn.engine_choice import OUT_OF_CONTEST
    from deepbench.kernels.timing.events import HOLD_CLOCK_HZ
    from deepbench.kernels.timing.graph_events import quick_us

    cycles = int(SPIN_S * HOLD_CLOCK_HZ)

    def fast() -> None:
        torch.cuda._sleep(cycles)

    def slow() -> None:
        until = time.perf_counter() + SLOW_HOST_S
        while time.perf_counter() < until:  # a busy host, not a sleeping one
            pass
        torch.cuda._sleep(cycles)

    reference = quick_us(fast)
    figure = quick_us(slow, out_of_contest_us=reference / 1.2 * OUT_OF_CONTEST)
    assert figure == pytest.approx(reference, rel=0.1), (figure, reference)


@pytest.mark.slow
def test_cublas_receives_deepbench_problem() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "tests" / "benchmarks" / "cublas_layout.py")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
