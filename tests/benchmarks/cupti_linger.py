"""Does CUPTI, once started, slow the harness's own measurements of launch-bound eager work?

In one process: DeepBench training RNNs whose backward the harness times eagerly (cuDNN's RNN
backward is not captured in a CUDA graph; these fp16 ones take 0.6-1.5 ms on an H100, short
enough for the host's launches to set the pace), measured twice, then once more after a CUPTI
recording of a short GEMM graph (as --kernel-time makes). Prints per kernel the backward's
second/first (the harness's own repeatability) and third/second (after CUPTI attached) medians.

    python tests/benchmarks/cupti_linger.py     # on a GPU machine, a fresh process each time
Results: tests/benchmarks/results/cupti_linger-h100.log."""

from __future__ import annotations

import argparse
import statistics

import torch

from deepbench.kernels.backends.pytorch import TorchBackend
from deepbench.kernels.catalog import by_id
from deepbench.kernels.harness.execute import run_item
from deepbench.kernels.results import PlanItem, Settings
from deepbench.kernels.timing import cupti
from deepbench.kernels.timing.cuda import capture
from deepbench.runner.run import MODES

KERNELS = ("rnn/train/023", "rnn/train/019", "rnn/train/012", "rnn/train/001", "rnn/train/015", "rnn/train/033")
PRECISION = "fp16"
GRAPH_CALLS = 200


def backward_medians(backend: TorchBackend) -> dict[str, float]:
    out = {}
    for kid in KERNELS:
        r = run_item(backend, PlanItem(kernel=by_id()[kid], precision=PRECISION), backend.settings)
        bwd = [p for p in r.parts if p.direction == "bwd"]
        out[kid] = bwd[0].measurement.stats.median if r.status.value == "ok" and bwd else float("nan")
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
    backend = TorchBackend(Settings(device="cuda", **preset))
    backend._ceilings = {}  # no roofline: the ceilings take seconds and are not what this measures
    backward_medians(backend)  # cuDNN's plans, the allocator, the clocks
    first, second = backward_medians(backend), backward_medians(backend)
    attach_cupti()
    third = backward_medians(backend)
    print(f"{'kernel':16} {'bwd us':>9} {'2nd/1st':>8} {'after CUPTI/2nd':>16}")
    for kid in KERNELS:
        print(f"{kid:16} {first[kid]:9.1f} {second[kid] / first[kid]:8.3f} {third[kid] / second[kid]:16.3f}")
    print(f"geomean: 2nd/1st {statistics.geometric_mean([second[k] / first[k] for k in KERNELS]):.3f}, "
          f"after CUPTI/2nd {statistics.geometric_mean([third[k] / second[k] for k in KERNELS]):.3f}")


if __name__ == "__main__":
    main()
