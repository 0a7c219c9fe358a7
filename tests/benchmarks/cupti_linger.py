"""Does CUPTI, once started, slow the harness's own later measurements?

In one process, the backward of DeepBench training RNNs (cuDNN, fp16; 0.6-1.5 ms on an H100, short
enough for the host's launches to set the pace of an eager loop) timed two ways: replayed from a
CUDA graph, as the harness times it, and by eager launches between events (how it was timed before
the backward was captured; still the fallback for work a graph cannot capture). Each way is
measured twice, then once more after a CUPTI recording of a short GEMM graph (as kernel time
makes). Prints per kernel and way the medians' second/first (repeatability) and third/second
(after CUPTI attached). Kernel time is off here, so nothing starts CUPTI before the recording.

    python tests/benchmarks/cupti_linger.py     # on a GPU machine, a fresh process each time
Results: tests/benchmarks/results/cupti_linger-h100.log."""

from __future__ import annotations

import argparse
import statistics

import torch

from deepbench.kernels.backends.base import TimedPart
from deepbench.kernels.backends.pytorch import TorchBackend
from deepbench.kernels.catalog import by_id
from deepbench.kernels.harness.execute import stop_rule
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Settings
from deepbench.kernels.timing import cuda as cuda_timer
from deepbench.kernels.timing import cupti
from deepbench.kernels.timing.eager import METHOD_EAGER
from deepbench.kernels.timing.graph import capture
from deepbench.runner.launch.modes import MODES

KERNELS = ("rnn/train/023", "rnn/train/019", "rnn/train/012", "rnn/train/001", "rnn/train/015", "rnn/train/033")
PRECISION = "fp16"
GRAPH_CALLS = 200
WAYS = {"graph": True, "eager": False}  # way -> capturable


def backward_medians(backend: TorchBackend, parts: dict[str, TimedPart]) -> dict[tuple[str, str], float]:
    """(kernel, way) -> the median us of the backward measured that way."""
    rule = stop_rule(backend.settings)
    out = {}
    for kid, part in parts.items():
        for way, capturable in WAYS.items():
            m, notes = cuda_timer.measure(part.run, rule, backend.settings, capturable, backend.device, backend.clocks)
            assert m.method != METHOD_EAGER or not capturable, notes.get("eager_reason")
            out[kid, way] = m.stats.median
    return out


def attach_cupti() -> None:
    """One recording of replays of a 3 us GEMM, as KernelTimes records them."""
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 16, device="cuda", dtype=torch.float16)
    graph = capture(lambda: torch.mm(a, b), GRAPH_CALLS)
    with cupti.recording() as prof:
        for _ in range(10):
            graph.replay()
        torch.cuda.synchronize()
    assert cupti.device_events(prof), "CUPTI recorded nothing"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.parse_args()
    preset = {k: v for k, v in MODES["default"].items() if k != "warm_up_s"}
    backend = TorchBackend(Settings(device="cuda", kernel_time=False, **preset))
    parts = {}
    for kid in KERNELS:
        prepared = backend.prepare(by_id()[kid], Precision(PRECISION))
        parts[kid] = next(p for p in prepared.parts if p.direction == "bwd")
        parts[kid].run()
    backward_medians(backend, parts)  # cuDNN's plans, the allocator, the clocks
    first, second = backward_medians(backend, parts), backward_medians(backend, parts)
    attach_cupti()
    third = backward_medians(backend, parts)
    print(f"{'kernel':16} {'way':6} {'bwd us':>9} {'2nd/1st':>8} {'after CUPTI/2nd':>16}")
    for kid in KERNELS:
        for way in WAYS:
            key = (kid, way)
            print(f"{kid:16} {way:6} {first[key]:9.1f} {second[key] / first[key]:8.3f} "
                  f"{third[key] / second[key]:16.3f}")
    for way in WAYS:
        keys = [(k, way) for k in KERNELS]
        print(f"geomean {way}: 2nd/1st {statistics.geometric_mean([second[k] / first[k] for k in keys]):.3f}, "
              f"after CUPTI/2nd {statistics.geometric_mean([third[k] / second[k] for k in keys]):.3f}")


if __name__ == "__main__":
    main()
