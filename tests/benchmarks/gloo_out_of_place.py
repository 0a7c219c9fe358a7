"""Why a one-rank out-of-place all-reduce on gloo read 8,111 us against 11.9 us in place (400 KB).

torch.distributed has no out-of-place all_reduce, so out of place is a copy into the output and
the in-place call. torch's copy_ of 100,000 floats runs on OpenMP threads, which keep spinning
after it; gloo reduces on a worker thread of its own, which then waits for a core. On an idle
machine nothing shows; on a busy one the wait is milliseconds. A memcpy on the calling thread
(numpy) leaves no spinning threads behind (kernels/backends/distributed/torch_dist.py).

    python tests/benchmarks/gloo_out_of_place.py [--busy N]

prints the median time per call (us) of: in place, torch copy_ + in place, numpy memcpy + in
place; with N busy processes (`python -c 'while True: pass'`) running beside it."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

FLOATS = 100_000  # DeepBench's smallest all-reduce: 400 KB
CALLS = 200
SAMPLES = 15


def per_call_us(fn) -> float:
    xs = []
    for _ in range(SAMPLES):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        xs.append((time.perf_counter() - t0) / CALLS * 1e6)
    return statistics.median(xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the measurement")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        send = torch.randint(1, 9, (FLOATS,)).float()
        recv, work = torch.empty(FLOATS), send.clone()
        rn, sn = recv.numpy(), send.numpy()
        rows = {"in place": lambda: dist.all_reduce(work),
                "torch copy_ + in place": lambda: (recv.copy_(send), dist.all_reduce(recv)),
                "numpy memcpy + in place": lambda: (np.copyto(rn, sn), dist.all_reduce(recv))}
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.busy} busy processes")
        for name, fn in rows.items():
            print(f"{name:>24}: {per_call_us(fn):10.1f} us")
        dist.destroy_process_group()
    finally:
        for p in busy:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
