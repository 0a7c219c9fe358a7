"""What a CPU run records as its ceilings, measured the way a GPU run measures its own
(cuda_facts.py): a large GEMM per precision, with the run's threads, through the same code the
GEMM kernels run (gemm.prepare), and a copy bandwidth over a buffer well beyond the last-level
cache. The roofline and % of peak then mean the same on a Raspberry Pi, a Xeon and an H100.

Kept short, so that it adds little to a smoke run: the GEMM grows from GEMM_START until one call
lasts GEMM_CALL_S (a Pi reaches it at 512, a server at 2048-4096, where BLAS runs near its peak),
then a few samples for at most CEILING_TIME_S per ceiling. A ceiling is what the machine can do,
so it is taken from the fastest sample, not the median: other work on a shared CPU only ever
slows a sample down (a loaded 2-core machine read medians 2-5x below its fastest samples)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch

from ...catalog import GemmKernel
from ...precision import Precision
from ...system import last_level_cache_bytes
from ...timing import cpu as cpu_timer
from ...timing.stopping import StopRule
from ..contract.base import Unsupported
from ..shared.torch_context import TorchContext
from . import gemm

GEMM_START = 256
GEMM_MAX = 4096
GEMM_CALL_S = 0.02
SIZING_CALLS = 3
CEILING_TIME_S = 0.15
CEILING_RULE = StopRule(target_rel_precision=0.02, min_samples=3, max_samples=50, time_cap_s=CEILING_TIME_S)
COPY_MIN_BYTES = 64 * 2**20
COPY_CACHE_MULTIPLE = 4  # the copied buffer is at least this many times the last-level cache
COPY_MEMORY_FRACTION = 16  # and at most this fraction of the memory the process can have (source and destination each)
FLOAT32_BYTES = 4


def _seconds(fn: Callable[[], object], calls: int = SIZING_CALLS) -> float:
    """The fastest of a few calls: one call preempted on a busy machine must not stop the GEMM's growth."""
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_ceiling(ctx: TorchContext, precision: Precision) -> tuple[float, int] | None:
    """(TFLOP/s, n) of an n^3 NN GEMM in `precision`, or None where the CPU cannot run it."""
    n = GEMM_START
    while True:
        kernel = GemmKernel(set="train", index=0, m=n, n=n, k=n, a_t=False, b_t=False)
        try:
            ctx.set_precision_mode(precision)
            run = gemm.prepare(ctx, kernel, precision).parts[0].run
            run()  # the library's first call: handles, packing, thread start-up
        except (Unsupported, RuntimeError):
            return None
        if _seconds(run) >= GEMM_CALL_S or n >= GEMM_MAX:
            break
        n *= 2
    m = cpu_timer.measure(run, CEILING_RULE, GEMM_CALL_S)
    return kernel.flops() / (m.stats.min * 1e-6) / 1e12, n


def copy_ceiling(memory_bytes: int | None) -> tuple[float, int]:
    """(GB/s, bytes) of a float32 copy, read and write counted as the GPU's copy ceiling counts them."""
    nbytes = max(COPY_MIN_BYTES, COPY_CACHE_MULTIPLE * (last_level_cache_bytes() or 0))
    if memory_bytes:
        nbytes = min(nbytes, memory_bytes // COPY_MEMORY_FRACTION)
    src = torch.full((nbytes // FLOAT32_BYTES,), 1.0, dtype=torch.float32)  # a copy's speed is not the values
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch of the destination's pages
    m = cpu_timer.measure(lambda: dst.copy_(src), CEILING_RULE, GEMM_CALL_S)
    return 2 * nbytes / (m.stats.min * 1e-6) / 1e9, nbytes


def measure_cpu_ceilings(
    ctx: TorchContext, precisions: Iterable[Precision], memory_bytes: int | None
) -> dict[str, float]:
    start = time.perf_counter()
    out: dict[str, float] = {"threads": float(torch.get_num_threads())}
    for p in dict.fromkeys(precisions or (Precision.FP32,)):
        got = gemm_ceiling(ctx, p)
        if got:
            out[f"tflops_{p.value}"], out[f"gemm_n_{p.value}"] = got[0], float(got[1])
    ctx.set_precision_mode(Precision.FP32)
    out["gbps_copy"], copied = copy_ceiling(memory_bytes)
    out["copy_bytes"] = float(copied)
    out["seconds"] = time.perf_counter() - start  # what measuring them added to the run
    return out
