"""Measure the check errors of correct RNN computations on this CPU and set them against the
tolerances kernels/precision.py derives (`recurrence_tolerance`): for each precision, cell, hidden
size and number of steps, over several seeds, the largest error, the error the model expects
(u (1 + sqrt(steps)) + u_acc sqrt(reduction)), their ratio, and the margin (tolerance / error).

    python tests/benchmarks/rnn_tolerance.py                 # the grid in docs/tolerances.md
    python tests/benchmarks/rnn_tolerance.py --quick         # a smaller grid (a minute)

The computations are the backend's own (kernels/backends/pytorch/rnn.py: prepare, run, check),
one thread, fp16/bf16/fp32 on CPU PyTorch."""

from __future__ import annotations

import argparse
import itertools
import math
import time

import torch

from deepbench.kernels.backends.pytorch import rnn
from deepbench.kernels.backends.shared.torch_context import TorchContext
from deepbench.kernels.catalog import RnnKernel
from deepbench.kernels.precision import (
    ACCUMULATOR_ROUNDOFF,
    PRECISIONS,
    UNIT_ROUNDOFF,
    Precision,
    recurrence_tolerance,
)

FULL = dict(
    precisions=("fp16", "bf16", "fp32"),
    cells=("vanilla", "lstm", "gru"),
    hidden=(256, 512),
    steps=(1, 10, 50, 200),
    batch=(16,),
    seeds=5,
)
QUICK = dict(
    precisions=("fp16", "bf16", "fp32"),
    cells=("vanilla", "lstm", "gru"),
    hidden=(64,),
    steps=(1, 10, 50),
    batch=(4,),
    seeds=3,
)


def expected(precision: Precision, hidden: int, batch: int, steps: int, direction: str) -> float:
    u, acc = UNIT_ROUNDOFF[precision], ACCUMULATOR_ROUNDOFF[PRECISIONS[precision].accumulate]
    if direction == "fwd":
        return u * 2 + acc * math.sqrt(hidden)
    return u * (1 + math.sqrt(steps)) + acc * math.sqrt(batch * steps)


def errors(precision: Precision, cell: str, hidden: int, batch: int, steps: int, seeds: int) -> dict[str, float]:
    """The largest check error per direction over `seeds` seeds (one thread: two OpenMP threads on a
    busy machine spin at barriers and run these small layers hundreds of times slower)."""
    worst = {"fwd": 0.0, "bwd": 0.0}
    kernel = RnnKernel(set="train", index=0, hidden=hidden, batch=batch, timesteps=steps, cell=cell)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for seed in range(seeds):
            prepared = rnn.prepare(TorchContext(torch.device("cpu"), seed), kernel, precision)
            for part in prepared.parts:
                part.run()
                check = part.check()
                assert check.error is not None, (kernel, precision, part.direction, check)
                worst[part.direction] = max(worst[part.direction], check.error)
    finally:
        torch.set_num_threads(threads)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    grid = QUICK if parser.parse_args().quick else FULL
    print(
        "| precision | cell | hidden | batch | steps | direction | max error | expected | ratio | tolerance | margin |"
    )
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    started = time.monotonic()
    worst_ratio, least_margin = 0.0, math.inf
    for name, cell, hidden, batch, steps in itertools.product(
        grid["precisions"], grid["cells"], grid["hidden"], grid["batch"], grid["steps"]
    ):
        p = Precision(name)
        found = errors(p, cell, hidden, batch, steps, grid["seeds"])
        for direction, err in found.items():
            exp = expected(p, hidden, batch, steps, direction)
            tol = recurrence_tolerance(p, hidden, batch, steps, direction)
            worst_ratio, least_margin = max(worst_ratio, err / exp), min(least_margin, tol / err)
            print(
                f"| {name} | {cell} | {hidden} | {batch} | {steps} | {direction} | {err:.2e} | {exp:.2e} | "
                f"{err / exp:.2f} | {tol:.2e} | {tol / err:.1f} |",
                flush=True,
            )
    print(
        f"\nworst error / expected: {worst_ratio:.2f}; least margin (tolerance / error): {least_margin:.1f}; "
        f"{grid['seeds']} seeds; {time.monotonic() - started:.0f} s; torch {torch.__version__}"
    )


if __name__ == "__main__":
    main()
