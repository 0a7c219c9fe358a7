"""Synthetic results folders for the report and compare tests: real result records (validated by
the same models) whose samples are drawn from known distributions, so that a comparison's right
answer is known in advance. Test data only: the check says it is synthetic."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from deepbench.kernels.catalog import Kernel
from deepbench.kernels.precision import PRECISIONS, Precision
from deepbench.kernels.results import (
    RESULTS_FILE,
    RUN_FILE,
    Check,
    KernelResult,
    Measurement,
    PartResult,
    RunRecord,
    Settings,
    Status,
    TimeStats,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SYNTHETIC_CHECK = Check(passed=True, method="synthetic-test-data", error=0.0, tolerance=0.0)


def base_time_us(kernel: Kernel, direction: str) -> float:
    """A plausible, kernel-dependent time: 1 us plus the FLOPs at 10 TFLOP/s."""
    return 1.0 + (kernel.flops(direction) if kernel.op != "all_reduce" else 4.0 * kernel.floats) / 10e12 * 1e6


def result(kernel: Kernel, precision: str, times: Callable[[str], Iterable[float]]) -> KernelResult:
    """An ok result whose every direction has the given samples (us)."""
    info = PRECISIONS[Precision(precision)]
    if kernel.op == "all_reduce":
        return KernelResult(
            id=f"{kernel.id}/{precision}",
            kernel=kernel,
            precision=info,
            backend="synthetic",
            status=Status.UNSUPPORTED,
            reason="synthetic run: no all-reduce",
            started_at=T0,
            ended_at=T0,
        )
    parts = []
    for d in kernel.DIRECTIONS:
        m = Measurement.of(
            list(times(d)),
            method="synthetic",
            calls_per_sample=1,
            warmup_calls=0,
            stop_reason="converged",
            target_rel_precision=0.01,
        )
        median = m.stats.median
        flops = kernel.flops(d)
        nbytes = kernel.min_bytes(d, Precision(precision))
        parts.append(
            PartResult(
                direction=d,
                measurement=m,
                flops=flops,
                min_bytes=nbytes,
                check=SYNTHETIC_CHECK,
                tflops=flops / median / 1e6,
                gbps=nbytes / median / 1e3,
            )
        )
    total = TimeStats.total(p.measurement.stats for p in parts)
    flops = sum(p.flops for p in parts)
    return KernelResult(
        id=f"{kernel.id}/{precision}",
        kernel=kernel,
        precision=info,
        backend="synthetic",
        status=Status.OK,
        time_us=total,
        tflops=flops / total.median / 1e6,
        gbps=sum(p.min_bytes for p in parts) / total.median / 1e3,
        check=SYNTHETIC_CHECK,
        parts=tuple(parts),
        started_at=T0,
        ended_at=T0,
    )


def noisy(
    kernel: Kernel, factor: float, rel_noise: float, n: int, rng: np.random.Generator
) -> Callable[[str], list[float]]:
    """Samples around factor x the kernel's base time, normal with the given relative spread."""

    def draw(direction: str) -> list[float]:
        mean = base_time_us(kernel, direction) * factor
        return [float(max(mean * 0.05, x)) for x in rng.normal(mean, mean * rel_noise, n)]

    return draw


def write_run(
    folder: Path,
    results: list[KernelResult],
    suite: str = "train",
    run_id: str | None = None,
    ceilings: dict[str, float] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / RESULTS_FILE).open("w") as f:
        for r in results:
            f.write(r.model_dump_json() + "\n")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    run = RunRecord(
        run_id=run_id or folder.name,
        tool_version="test",
        suite=suite,
        platform="synthetic",
        backend="synthetic",
        settings=Settings(),
        state="complete",
        planned=len(results),
        counts=counts,
        device={"name": "synthetic device"},
        ceilings=ceilings or {},
        started_at=T0,
        ended_at=T0,
    )
    (folder / RUN_FILE).write_text(run.model_dump_json())
    return folder
