"""Fidelity benchmark (a script, not a unit test; needs an NVIDIA GPU and nvcc).

Are the harness's GPU times as right as a native loop's, and does a second run agree? For
DeepBench's training GEMMs in fp32, tf32, fp16 and bf16, after a warm-up that brings the GPU near
its working temperature, it runs:
  pass 1    the harness's timer (kernels/timing/cuda.py) with the default mode's settings, as
            `deepbench-run` measures: CUDA-graph replays timed by events, or for calls under
            20 us by CUPTI (`cuda-graph-cupti`: the kernels' own spans, without the GPU's gap
            between dependent kernels; --no-kernel-time times those by events too, as
            `deepbench-run --no-kernel-time` does); with --verify-timing's profiled samples right after each
            measurement: CUPTI's time per call, from a call's first kernel start to its last
            kernel end, for samples taken exactly as the timed ones in the same GPU state
            (kernels/timing/profiler_check.py verify, cupti.call_us). Skip the profiler with --no-profiler.
  native    a C++ loop over cublasGemmEx with DeepBench's (transa, transb, m, n, k), each kernel
            for as long as pass 1 measured it (gemm_loop.cu, built here with nvcc), two ways: a host
            loop of launches (DeepBench's way; launch-bound, so an upper bound for tiny kernels) and
            the same launches captured in a CUDA graph (`native-graph`: the harness's event timing
            in C++)
  pass 2    with --no-profiler only: the harness again, as pass 1: `repeat` is pass 2 / pass 1
            (skip with --no-repeat). Profiling between measurements lets the GPU cool: a profiled
            pass 1 ran power-limited GEMMs up to 6% faster than a plain pass 2 after it (H100), so
            the two passes are compared only where neither is profiled.
and prints per kernel the figures and the ratios harness/profiler, harness/native and repeat,
then a summary; with the convolution sample (every direction) against the profiler. Beside them,
informational: an event timer over the kernels' durations for the very same profiled samples
(`timer`), the harness over the kernels' summed durations (`busy`: without split-K's wait between
GEMM and reduction), and the native graph loop over the profiler (`ng/prof`): back-to-back calls
pay the GPU's gap between two dependent kernels (0.1-0.3 us, H100), which a kernel's duration
leaves out: several percent of a 3-5 us GEMM for a C++ loop as for an event timer (H100, the
training GEMMs under 10 us: native-graph/profiler median 1.034, 43 of 163 above 1.05), which is
why the harness times such calls by CUPTI. Under the profiler some large GEMMs run up to 20% slower than
without it (H100), so harness/profiler below 1 there is the profiler's doing: the native loop agrees.

A precision takes 5-7 minutes on an H100 either way (all four do not fit the lent GPU's 10 minutes
a call), so the benchmark runs in parts and sums them up afterwards:

    python tests/benchmarks/fidelity.py --precisions fp16 --no-conv --out fp16.json
    python tests/benchmarks/fidelity.py --precisions fp16 --no-conv --no-profiler --out fp16-repeat.json
    python tests/benchmarks/fidelity.py --no-gemm --out conv.json
    python tests/benchmarks/fidelity.py --merge fp32.json tf32.json fp16.json bf16.json conv.json
    python tests/benchmarks/fidelity.py --limit 10 --precisions fp16  # a quick look

Targets (issue 3): harness/profiler <= 1.05 for every training GEMM with median <= 1.02;
harness/native <= 1.05; two back-to-back harness passes within 3% for >= 95% of kernels.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from deepbench.kernels.backends.pytorch.backend import TorchBackend
from deepbench.kernels.harness.execute import stop_rule
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Settings
from deepbench.kernels.suites import select
from deepbench.kernels.timing import cuda as cuda_timer
from deepbench.kernels.timing import cupti
from deepbench.kernels.timing.cupti_kernel import METHOD_KERNELS
from deepbench.kernels.timing.warmup import warm_up
from deepbench.runner.launch.running.modes import MODES

HERE = Path(__file__).resolve().parent
GEMM_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
CONV_PRECISIONS = ("fp32", "fp16")
CONV_SAMPLE_EVERY = 8  # every 8th training convolution
PROFILER_TARGET = 1.05
PROFILER_MEDIAN_TARGET = 1.02
NATIVE_TARGET = 1.05
REPEAT_TOLERANCE = 0.03
REPEAT_SHARE = 0.95
WARM_UP_S = 60.0  # the repeatability passes start from a GPU near its working temperature (H100: 34 -> 69 C)
SMALL_US = 10.0  # kernels this short: a 0.1-0.3 us gap between graph nodes is several percent
NAMED = ((1760, 128, 1760, False, False), (5124, 9124, 2560, True, False))  # DeepBench README's V100 rows


def build_native(workdir: Path) -> Path:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    binary = workdir / "gemm_loop"
    cmd = [nvcc, "-O2", "-std=c++17", "-arch=sm_90", str(HERE / "gemm_loop.cu"), "-lcublas", "-ldl", "-o", str(binary)]
    subprocess.run(cmd, check=True)
    return binary


def native_times(binary: Path, problems: list[tuple], seconds: list[float]) -> dict[tuple, tuple[float, float]]:
    """The native loop's us per call (host loop, CUDA graph), each problem measured both ways for as
    long as the harness measured it."""
    text = "".join(
        f"{p} {'T' if at else 'N'} {'T' if bt else 'N'} {m} {n} {k} {s:.3f}\n"
        for (p, m, n, k, at, bt), s in zip(problems, seconds, strict=False)
    )
    out = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout
    times = {}
    for line in out.splitlines():
        p, ta, tb, m, n, k, us, _, graph_us = line.split()[:9]  # then the clocks, which this benchmark leaves out
        times[(p, int(m), int(n), int(k), ta == "T", tb == "T")] = (float(us), float(graph_us))
    return times


def harness_pass(backend: TorchBackend, items: list[tuple], settings: Settings) -> dict[tuple, dict]:
    """Time the parts of each (kernel, precision) with the harness's GPU timer; with
    settings.verify_timing the profiler then records samples taken the same way."""
    rule = stop_rule(settings)
    out: dict[tuple, dict] = {}
    for key, kernel, precision in items:
        prepared = backend.prepare(kernel, Precision(precision))
        for part in prepared.parts:
            part.run()
            m, notes = cuda_timer.measure(part.run, rule, settings, part.capturable, backend.device, backend.clocks)
            row = {
                "harness_us": m.stats.median,
                "method": m.method,
                "calls": m.calls_per_sample,
                "samples": m.stats.n,
                "discarded": m.discarded,
                "sm_mhz": statistics.median(m.clocks_mhz) if m.clocks_mhz else None,
                "settle_s": notes.get("clock_settle", {}).get("seconds", 0.0),
                "power_capped_samples": notes.get("power_capped_samples", 0),
                "temp_c": notes.get("gpu_temp_c"),
                "measured_s": m.stats.n * m.stats.median * m.calls_per_sample / 1e6,
                "graph_events_us": notes.get("graph_events_us"),
            }
            prof = notes.get("profiler")
            if prof:
                row.update(
                    profiler_us=prof["kernel_us"],
                    span_us=prof["span_us"],
                    period_us=prof["period_us"],
                    events_us=prof["events_us"],
                    profiled_samples=prof["samples"],
                    kernels_per_call=prof["kernels_per_call"],
                    kernels=prof["kernel_names"],
                    ratio_timer=prof["timer_ratio"],
                )
            out[(*key, part.direction)] = row
        del prepared
        backend.release()
    torch.cuda.empty_cache()
    return out


def profiler_call_us(row: dict[str, Any]) -> float:
    """The profiler's time per call (cupti.call_us: the span of the call's kernels), computed from
    the raw figures so parts written by older versions sum up alike."""
    return cupti.call_us({"span_us": row.get("span_us"), "kernel_us": row["profiler_us"]})


def profiler_ratio(row: dict[str, Any]) -> float:
    """Harness time over the profiler's time per call, both from the profiled pass (pass 1; parts
    written by older versions had a third pass for it, whose harness time is harness_us_profiled)."""
    return row.get("harness_us_profiled", row["harness_us"]) / profiler_call_us(row)


def busy_ratio(row: dict[str, Any]) -> float:
    """Harness time over the kernels' summed durations per call (no gap inside a call counted)."""
    return row.get("harness_us_profiled", row["harness_us"]) / row["profiler_us"]


def native_graph_ratio(row: dict[str, Any]) -> float:
    """The native graph loop's time over the profiler's time per call: how close back-to-back calls
    in C++ come to the kernel time (the floor the harness is held to)."""
    return row["native_graph_us"] / profiler_call_us(row)


def ratio_summary(
    name: str, ratios: list[float], limit: float, median_limit: float | None = None, informational: bool = False
) -> dict[str, Any]:
    s = {
        "name": name,
        "n": len(ratios),
        "max": max(ratios),
        "median": statistics.median(ratios),
        "min": min(ratios),
        "limit": limit,
        "over_limit": sum(r > limit for r in ratios),
    }
    s["pass"] = informational or (s["over_limit"] == 0 and (median_limit is None or s["median"] <= median_limit))
    if median_limit is not None:
        s["median_limit"] = median_limit
    if informational:
        s["informational"] = True
    return s


def gemm_rows(items: list[tuple], first: dict, second: dict | None, native: dict) -> list[dict[str, Any]]:
    """One row per GEMM: pass 1 (with the profiler's figures when it ran), pass 2 and the native loop."""
    rows = []
    print(
        f"{'prec':5} {'ta':2} {'tb':2} {'M':>6} {'N':>6} {'K':>6} {'by':6} {'harness_us':>11} {'native_us':>10} "
        f"{'profiler_us':>11} {'k/call':>6} {'h/prof':>7} {'h/busy':>7} {'timer':>6} {'ng/prof':>7} {'h/native':>8} "
        f"{'h/ngraph':>8} {'repeat':>7} {'MHz':>9} {'C':>5}"
    )
    for key, _, _ in items:
        a = first[(*key, "fwd")]
        p, m, n, k, at, bt = key
        native_us, native_graph_us = native[key]
        row = {
            "precision": p,
            "m": m,
            "n": n,
            "k": k,
            "a_t": at,
            "b_t": bt,
            **a,
            "native_us": native_us,
            "native_graph_us": native_graph_us,
            "ratio_native": a["harness_us"] / native_us,
            "ratio_native_graph": a["harness_us"] / native_graph_us,
            "named": (m, n, k, at, bt) in NAMED,
        }
        b = second[(*key, "fwd")] if second else {"harness_us": None, "sm_mhz": None, "settle_s": None, "temp_c": None}
        row.update(
            harness_us_second=b["harness_us"],
            sm_mhz_second=b["sm_mhz"],
            settle_s_second=b["settle_s"],
            temp_c_second=b["temp_c"],
            repeat=b["harness_us"] / a["harness_us"] if second else None,
        )
        prof = "-"
        if "profiler_us" in a:
            row.update(
                ratio_profiler=profiler_ratio(row),
                ratio_busy=busy_ratio(row),
                ratio_native_graph_profiler=native_graph_ratio(row),
            )
            prof = (
                f"{row['profiler_us']:11.2f} {row['kernels_per_call']:6.1f} {row['ratio_profiler']:7.3f} "
                f"{row['ratio_busy']:7.3f} {row['ratio_timer']:6.3f} {row['ratio_native_graph_profiler']:7.3f}"
            )
        rows.append(row)
        print(
            f"{p:5} {'T' if at else 'N':2} {'T' if bt else 'N':2} {m:6d} {n:6d} {k:6d} {timer_name(a['method']):6} "
            f"{a['harness_us']:11.2f} {native_us:10.2f} {prof:>51} {row['ratio_native']:8.3f} "
            f"{row['ratio_native_graph']:8.3f} {row['repeat'] or math.nan:7.3f} "
            f"{a['sm_mhz'] or 0:4.0f}/{b['sm_mhz'] or 0:4.0f} {a['temp_c'] or 0:2.0f}/{b['temp_c'] or 0:2.0f}"
            f"{'  <- DeepBench README' if row['named'] else ''}",
            flush=True,
        )
    return rows


def timer_name(method: str) -> str:
    """The harness's timer in a word: `cupti` (kernel spans) or `events` (graph replays timed by events)."""
    return "cupti" if method == METHOD_KERNELS else "events"


def conv_rows_of(results: dict) -> list[dict[str, Any]]:
    rows = []
    print(f"\n{'prec':5} {'conv':16} {'dir':10} {'harness_us':>11} {'profiler_us':>11} {'h/prof':>7} {'timer':>6}")
    for (p, cid, direction), r in results.items():
        rows.append({"precision": p, "id": cid, "direction": direction, **r, "ratio_profiler": profiler_ratio(r)})
        print(
            f"{p:5} {cid:16} {direction:10} {r['harness_us']:11.2f} {r['profiler_us']:11.2f} "
            f"{profiler_ratio(r):7.3f} {r['ratio_timer']:6.3f}"
        )
    return rows


def summarize(rows: list[dict], conv_rows: list[dict], device: str, elapsed: float) -> tuple[list[dict], bool]:
    """Print the SUMMARY lines; returns the summaries and whether every target is met."""
    summaries = []
    profiled = [r for r in rows if r.get("profiler_us") is not None]
    if rows:
        summaries.append(ratio_summary("gemm harness/native", [r["ratio_native"] for r in rows], NATIVE_TARGET))
        # parts written before the native graph loop existed have no such ratio
        graphed = [r["ratio_native_graph"] for r in rows if "ratio_native_graph" in r]
        if graphed:
            summaries.append(ratio_summary("gemm harness/native-graph", graphed, NATIVE_TARGET, informational=True))
    if profiled:
        summaries += [
            ratio_summary(
                "gemm harness/profiler", [profiler_ratio(r) for r in profiled], PROFILER_TARGET, PROFILER_MEDIAN_TARGET
            ),
            ratio_summary(
                "gemm timer/profiler, same samples",
                [r["ratio_timer"] for r in profiled],
                PROFILER_TARGET,
                informational=True,
            ),
            ratio_summary(
                "gemm harness/profiler-busy", [busy_ratio(r) for r in profiled], PROFILER_TARGET, informational=True
            ),
        ]
        for size, part in (
            (f"{SMALL_US:g} us and over", [r for r in profiled if r["profiler_us"] >= SMALL_US]),
            (f"under {SMALL_US:g} us", [r for r in profiled if r["profiler_us"] < SMALL_US]),
        ):
            if part:
                summaries.append(
                    ratio_summary(
                        f"gemm harness/profiler, {size}",
                        [profiler_ratio(r) for r in part],
                        PROFILER_TARGET,
                        informational=True,
                    )
                )
            graphed = [native_graph_ratio(r) for r in part if "native_graph_us" in r]
            if graphed:
                summaries.append(
                    ratio_summary(f"gemm native-graph/profiler, {size}", graphed, PROFILER_TARGET, informational=True)
                )
        over = [r for r in profiled if profiler_ratio(r) > PROFILER_TARGET]
        print(
            f"\nover {PROFILER_TARGET} harness/profiler: {len(over)} GEMMs; of them "
            f"{sum(r.get('kernels_per_call', 1) > 1 for r in over)} launch more than one kernel a call and "
            f"{sum(r['profiler_us'] < SMALL_US for r in over)} run under {SMALL_US:g} us"
        )
    if conv_rows:
        summaries.append(
            ratio_summary("conv harness/profiler", [profiler_ratio(r) for r in conv_rows], PROFILER_TARGET)
        )
    print()
    for s in summaries:
        print(
            f"SUMMARY {s['name']}: n={s['n']} median={s['median']:.4f} max={s['max']:.4f} min={s['min']:.4f} "
            f"over {s['limit']}: {s['over_limit']}  "
            f"{'(informational)' if s.get('informational') else 'PASS' if s['pass'] else 'FAIL'}"
        )
    repeated = [r for r in rows if r.get("repeat") is not None]
    if repeated:
        within = sum(abs(r["repeat"] - 1) <= REPEAT_TOLERANCE for r in repeated)
        repeat = {
            "name": "gemm repeatability",
            "n": len(repeated),
            "within_3pct": within,
            "share": within / len(repeated),
            "pass": within / len(repeated) >= REPEAT_SHARE,
            "max_abs_dev": max(abs(r["repeat"] - 1) for r in repeated),
        }
        print(
            f"SUMMARY gemm repeatability: {within}/{len(repeated)} ({100 * repeat['share']:.1f}%) within 3%, "
            f"max deviation {100 * repeat['max_abs_dev']:.2f}%  {'PASS' if repeat['pass'] else 'FAIL'}"
        )
        summaries.append(repeat)
    print(f"SUMMARY elapsed {elapsed:.0f} s on {device}")
    return summaries, all(s["pass"] for s in summaries)


def progress(what: str, started: float) -> None:
    print(f"# {what} done at {time.time() - started:.0f} s", flush=True)


def merge(paths: list[Path]) -> int:
    """The summary over several parts' JSON (the same device expected)."""
    parts = [json.loads(p.read_text()) for p in paths]
    devices = {p["facts"]["device"]["name"] for p in parts}
    if len(devices) != 1:
        print(f"fidelity: parts from different devices: {sorted(devices)}", file=sys.stderr)
        return 2
    rows = [r for p in parts for r in p["gemm"]]
    conv = [r for p in parts for r in p["conv"]]
    print(f"# merged {len(paths)} parts: {', '.join(str(p) for p in paths)}")
    _, ok = summarize(rows, conv, devices.pop(), sum(p["elapsed_s"] for p in parts))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write every figure as JSON here")
    ap.add_argument("--limit", type=int, help="first N training GEMMs only")
    ap.add_argument("--precisions", default=",".join(GEMM_PRECISIONS))
    ap.add_argument("--no-conv", action="store_true", help="leave out the convolution sample")
    ap.add_argument("--no-gemm", action="store_true", help="the convolution sample only")
    ap.add_argument(
        "--no-profiler", action="store_true", help="leave out the profiler's samples after each GEMM's measurement"
    )
    ap.add_argument("--no-repeat", action="store_true", help="with --no-profiler: leave out pass 2 (repeatability)")
    ap.add_argument(
        "--no-kernel-time",
        action="store_true",
        help="time short calls by events too, as deepbench-run --no-kernel-time does",
    )
    ap.add_argument(
        "--warm-up",
        type=float,
        default=WARM_UP_S,
        metavar="S",
        help=f"seconds of a large GEMM at most before the first pass (default {WARM_UP_S:g})",
    )
    ap.add_argument("--merge", type=Path, nargs="+", metavar="JSON", help="summarize parts written with --out")
    args = ap.parse_args()
    if args.merge:
        return merge(args.merge)
    if not torch.cuda.is_available():
        print("fidelity: needs an NVIDIA GPU", file=sys.stderr)
        return 2
    started = time.time()
    # The default mode's measuring settings (what `deepbench-run` uses); pass 1 adds the profiler.
    settings = Settings(device="cuda", kernel_time=not args.no_kernel_time, **MODES["default"])
    profiling = settings.model_copy(update={"verify_timing": True})
    backend = TorchBackend(settings)
    facts = {
        "device": backend.device_facts(),
        "software": backend.library_versions(),
        "settings": settings.model_dump(),
    }
    print(f"# device {facts['device']['name']}  {json.dumps(facts['software'])}", flush=True)

    gemms = [] if args.no_gemm else select("train", ops=["gemm"], limit=args.limit)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    items = [((p, k.m, k.n, k.k, k.a_t, k.b_t), k, p) for p in precisions for k in gemms]
    rows = []
    if items:
        with tempfile.TemporaryDirectory() as tmp:
            binary = build_native(Path(tmp))
            facts["warm_up"] = warm_up(backend.device, backend.clocks.temperature_c, args.warm_up)
            print(f"# warm-up {json.dumps(facts['warm_up'])}", flush=True)
            first = harness_pass(backend, items, settings if args.no_profiler else profiling)
            progress("pass 1", started)
            keys = [key for key, _, _ in items]
            native = native_times(binary, keys, [first[(*key, "fwd")]["measured_s"] for key in keys])
            progress("native loop", started)
        second = harness_pass(backend, items, settings) if args.no_profiler and not args.no_repeat else None
        progress("passes", started)
        rows = gemm_rows(items, first, second, native)

    conv_rows = []
    if not args.no_conv:
        convs = select("train", ops=["conv"])[::CONV_SAMPLE_EVERY]
        citems = [((p, c.id), c, p) for p in CONV_PRECISIONS for c in convs]
        conv_rows = conv_rows_of(harness_pass(backend, citems, profiling))

    elapsed = time.time() - started
    summaries, ok = summarize(rows, conv_rows, facts["device"]["name"], elapsed)
    if args.out:
        args.out.write_text(
            json.dumps(
                {"facts": facts, "gemm": rows, "conv": conv_rows, "summary": summaries, "elapsed_s": elapsed},
                indent=1,
                default=str,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
