"""Where the harness's graph time and the kernels' own durations part: the gap between kernels.

Captures N calls of one small DeepBench GEMM in a CUDA graph (as kernels/timing/graph.py does),
records one replay with the CUDA profiler, and prints per call: the event-timed replay time, the
kernels' summed durations, and the mean idle gap between one kernel's end and the next one's
start inside the graph. The gap is the device's dependent-launch latency, which a back-to-back
measurement includes and a kernel duration does not.

    python tests/benchmarks/graph_gap.py
"""

from __future__ import annotations

import statistics

import torch

from deepbench.kernels.backends.pytorch import TorchBackend
from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Settings
from deepbench.kernels.timing import cupti
from deepbench.kernels.timing.graph import capture

CALLS = 200
KERNELS = (("gemm/train/000", "fp16"), ("gemm/train/000", "fp32"), ("gemm/train/003", "bf16"))


def main() -> None:
    backend = TorchBackend(Settings(device="cuda"))
    for kid, prec in KERNELS:
        part = backend.prepare(by_id()[kid], Precision(prec)).parts[0]
        part.run()
        graph = capture(part.run, CALLS)
        graph.replay()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(5):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / CALLS)
        with cupti.recording() as prof:
            graph.replay()
            torch.cuda.synchronize()
        ks = [(a, b) for a, b, _ in cupti.device_events(prof)]
        busy = sum(b - a for a, b in ks) / CALLS
        gaps = [ks[i + 1][0] - ks[i][1] for i in range(len(ks) - 1)]
        span = (ks[-1][1] - ks[0][0]) / CALLS if ks else float("nan")
        print(f"{kid} {prec}: events {statistics.median(times):.3f} us/call; profiler in graph: {len(ks) / CALLS:.1f} "
              f"kernels/call, busy {busy:.3f} us/call, span {span:.3f} us/call, median gap "
              f"{statistics.median(gaps) if gaps else float('nan'):.3f} us")
        del graph
        backend.release()


if __name__ == "__main__":
    main()
