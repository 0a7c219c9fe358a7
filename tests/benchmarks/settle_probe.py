"""Raw time series of GPU GEMM samples, for choosing how long to warm up and measure (GPU only).

Two passes of the harness's timing do not agree when the SM clock differs between them, and on
an H100/H200 the clock is the power limiter's: it falls within ~0.1 s under a large GEMM and
oscillates, and it climbs back only slowly when a small GEMM follows a large one. To choose a
warm-up and measuring time from data rather than by guess, this script records, for a dozen
training GEMMs (the worst repeatability misses of earlier runs), the harness's own samples
(one CUDA-graph replay >= 1 ms each, timed by events, SM clock read while it runs) back to back
for a few seconds, twice per kernel, after two different histories:

  after-heavy  a large bf16 GEMM ran for 0.5 s just before (the chip is power-limited)
  after-idle   the GPU idled for 0.5 s just before

and writes every sample (seconds since the series began, us per call, MHz) to --out.
tests/benchmarks/settle_rules.py replays these series through candidate rules offline.
It also checks the profiler cross-check (kernels/timing/profiler_check.py: verify) on each kernel.

    python tests/benchmarks/settle_probe.py --out settle.json [--series-s 2.5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from deepbench.kernels.backends.pytorch import TorchBackend
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Settings
from deepbench.kernels.suites import select
from deepbench.kernels.timing.clocks import ClockReader
from deepbench.kernels.timing.profiler_check import verify
from deepbench.kernels.timing.strategy import graph_sampler

PROBES = (  # (precision, m, n, k, a_t, b_t)
    ("bf16", 7680, 24000, 2560, False, False),
    ("fp16", 3072, 48000, 1024, False, False),
    ("fp16", 512, 48000, 2560, False, False),
    ("bf16", 1024, 24000, 2048, True, False),
    ("fp16", 512, 24000, 2560, False, False),
    ("tf32", 35, 8457, 4096, False, False),
    ("tf32", 4608, 16, 1536, True, False),
    ("fp16", 2560, 16, 2560, False, False),
    ("fp16", 1760, 16, 1760, True, False),
    ("bf16", 2048, 16, 2048, True, False),
    ("fp16", 512, 16, 512, False, True),
    ("tf32", 512, 16, 512, False, False),
)
HEAVY = ("bf16", 7680, 24000, 2560, False, False)
SAMPLE_S = 1e-3
CONTEXT_S = 0.5
LAST_S = 0.5  # the steady end of a series: its median, and as long a profiled window


class Probe:
    """The harness's graph sampler for one part, reading the SM clock while each replay runs."""

    def __init__(self, run, clocks: ClockReader) -> None:
        self.mhz: float | None = None
        self.clocks = clocks
        self.sampler = graph_sampler(run, SAMPLE_S, self.during)

    def during(self) -> None:
        self.mhz = self.clocks.sm_mhz()

    def series(self, seconds: float) -> list[tuple[float, float, float | None]]:
        """(t, us per call, MHz) per replay for `seconds`."""
        rows = []
        t0 = time.perf_counter()
        while (t := time.perf_counter() - t0) < seconds:
            us = self.sampler.take()
            rows.append((round(t, 5), round(us, 4), self.mhz))
        return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series-s", type=float, default=2.5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    backend = TorchBackend(Settings(device="cuda"))
    kernels = {(k.m, k.n, k.k, k.a_t, k.b_t): k for k in select("train", ops=["gemm"])}

    def part_of(spec):
        prec, *shape = spec
        return kernels[tuple(shape)], backend.prepare(kernels[tuple(shape)], Precision(prec)).parts[0]

    _, heavy_part = part_of(HEAVY)
    heavy = Probe(heavy_part.run, backend.clocks)
    out = {"device": torch.cuda.get_device_name(), "series_s": args.series_s, "context_s": CONTEXT_S, "kernels": []}
    print(f"# {out['device']}: per kernel {args.series_s}s of samples after 0.5 s of a large GEMM, "
          "then after 0.5 s idle")
    print(f"{'precision':9} {'kernel':15} {'context':11} {'first50ms':>10} {'last0.5s':>10} {'MHz first/last':>15} "
          f"{'prof.busy':>10} {'ratio':>6}")
    for spec in PROBES:
        kernel, part = part_of(spec)
        part.run()
        probe = Probe(part.run, backend.clocks)
        entry = {"precision": spec[0], "id": kernel.id, "shape": spec[1:], "calls": probe.sampler.calls, "series": {}}
        for context in ("after-heavy", "after-idle"):
            if context == "after-heavy":
                heavy.series(CONTEXT_S)
            else:
                torch.cuda.synchronize()
                time.sleep(CONTEXT_S)
            rows = probe.series(args.series_s)
            entry["series"][context] = rows
            first = [r for r in rows if r[0] < 0.05]
            last = [r for r in rows if r[0] >= args.series_s - LAST_S]
            med_last = statistics.median(r[1] for r in last)
            prof = verify(probe.sampler, med_last, LAST_S)
            entry["series"][context + "-profiler"] = {k: prof[k] for k in ("kernel_us", "span_us", "period_us",
                                                                             "kernels_per_call", "kernel_names")}
            print(f"{spec[0]:9} {kernel.id:15} {context:11} {statistics.median(r[1] for r in first):10.2f} "
                  f"{med_last:10.2f} {statistics.median(r[2] or 0 for r in first):7.0f}/"
                  f"{statistics.median(r[2] or 0 for r in last):<7.0f} {prof['kernel_us']:10.2f} "
                  f"{med_last / prof['kernel_us']:6.3f}", flush=True)
        out["kernels"].append(entry)
        del probe, part
        backend.release()
    t0 = time.perf_counter()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]):
        t1 = time.perf_counter()
    print(f"# profiler start {1e3 * (t1 - t0):.1f} ms, stop {1e3 * (time.perf_counter() - t1):.1f} ms (warm)")
    args.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
