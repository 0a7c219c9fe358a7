"""Convolutions beside conv_loop in one process, taken in turns (issue 20's evidence; a script, not a
unit test: needs an NVIDIA GPU, the cuDNN backend's bindings and build_native.sh's libconv_loop.so).

native_side_by_side.py sets the figure a suite run recorded beside conv_loop run minutes later in a
process of its own. For convolutions of 20-45 us those differ by 3-8% on the very same plan, and
conv_process_probe.py showed that the call is not why: both graphs hold the same kernels with the
same launch figures and attributes (--graphs, DOT files), and conv_loop's own code reads 3-8% slower
in any pass after a process's first (--passes, --state), as fast as the harness's call. So this
script sets the two side by side where both see the same GPU and the same process, in ROUNDS turns
per convolution result:

  harness  the harness's own measurement of the kernel: kernels.harness.execute.run_item, with the
           run's settings (plan.json: timer, stop rule, kernel time) and each direction pinned to
           the cuDNN plan its result recorded, as `deepbench verify` re-runs a submission; the
           warm-up call, the timing and the check all run as in the suite;
  native   conv_loop's own code (the same C++ source as the conv_loop program, built as a library)
           on the lines native_side_by_side.py hands conv_loop: the direction's graph, that plan
           by name, the padded sizes; a host loop and a graph, the better of the two.

Per direction: the median of the harness's figures over the median of conv_loop's, and the recorded
figure beside them. The SUMMARY lines and the targets are native_side_by_side.py's. Give
--no-kernel-time for a comparison: once the harness has started CUPTI in the process, conv_loop's
waited-for samples read 5-12% slower (tests/benchmarks/results/server-conv-fp16-interleaved-h100/).

    bash tests/benchmarks/build_native.sh
    python tests/benchmarks/conv_interleaved.py RESULTS_DIR --only 'conv/inference_server/*/fp16' \
        --no-kernel-time --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import native_side_by_side as sbs  # beside this file: the loops' lines, rows and SUMMARY lines
from conv_loop_library import LIBRARY, ConvLoop

from deepbench.kernels.results import PLAN_FILE, KernelResult, Plan, PlanItem, Settings, Status
from deepbench.runner.submission.verify import recorded_engines

ROUNDS = 3


def harness_settings(folder: Path, results: list[KernelResult], warm_up_s: float, kernel_time: bool) -> Settings:
    """The run's settings (its plan.json), each direction pinned to the plan it recorded; CUPTI's
    kernel time only where the run used it and `kernel_time` allows."""
    path = folder / PLAN_FILE
    try:
        plan = Plan.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise sbs.UsageError(f"{path}: not a deepbench-run plan ({str(exc).splitlines()[0]})") from None
    return plan.settings.model_copy(update={"cudnn_engines": recorded_engines(results), "warm_up_s": warm_up_s,
                                            "kernel_time": plan.settings.kernel_time and kernel_time})


def harness_figures(backend: Any, r: KernelResult, settings: Settings) -> dict[str, float]:
    """direction -> the harness's median us for result `r`'s kernel, measured now (run_item)."""
    from deepbench.kernels.harness.execute import run_item
    again = run_item(backend, PlanItem(kernel=r.kernel, precision=r.precision.name), settings)
    if again.status is not Status.OK:
        raise RuntimeError(f"{r.id}: {again.status.value}: {again.reason}")
    return {p.direction: p.measurement.stats.median for p in again.parts}


def interleave(folder: Path, results: list[KernelResult], problems: list[sbs.Problem], args: argparse.Namespace
               ) -> list[dict[str, Any]]:
    """ROUNDS turns per result of the harness's measurement and conv_loop's; a row per direction."""
    from deepbench.kernels.backends import load_backend
    try:
        loop = ConvLoop(args.library)
    except FileNotFoundError as exc:
        raise sbs.UsageError(str(exc)) from None
    settings = harness_settings(folder, results, args.warm_up, not args.no_kernel_time)
    backend = load_backend("cudnn", settings)
    by_result: dict[str, list[sbs.Problem]] = {}
    for p in problems:
        by_result.setdefault(p.result_id, []).append(p)
    rows, started = [], time.monotonic()
    for i, r in enumerate(x for x in results if x.id in by_result):
        mine = by_result[r.id]
        harness: dict[str, list[float]] = {p.direction: [] for p in mine}
        native: dict[str, list[dict[str, Any]]] = {p.direction: [] for p in mine}
        error = ""
        for _ in range(args.rounds):
            try:
                figures = harness_figures(backend, r, settings)
            except RuntimeError as exc:
                error = str(exc)
                break
            out = sbs.parse_conv_output(loop.run([p.line for p in mine]))
            for p in mine:
                harness[p.direction].append(figures[p.direction])
                native[p.direction].append(sbs.make_row(p, {}, out))
        for p in mine:
            row = {"id": p.result_id, "op": "conv", "precision": p.precision, "direction": p.direction,
                   "recorded_us": p.harness_us, "line": p.line, "plan_name": p.plan, "engine": p.engine}
            turns = [n for n in native[p.direction] if "native_best_us" in n]
            if error or len(turns) < len(native[p.direction]) or not turns:
                row["error"] = error or next((n["error"] for n in native[p.direction] if "error" in n), "no rounds")
            else:
                row.update(harness_us=statistics.median(harness[p.direction]),
                           harness_rounds=harness[p.direction],
                           native_us=statistics.median(n["native_us"] for n in turns),
                           native_graph_us=statistics.median(n["native_graph_us"] for n in turns),
                           native_rounds=[n["native_best_us"] for n in turns])
                row["native_best_us"] = statistics.median(row["native_rounds"])
                row["ratio"] = row["harness_us"] / row["native_best_us"]
            row.setdefault("harness_us", p.harness_us)  # where no turn ran: the recorded figure
            rows.append(row)
        print(f"# {i + 1} results, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return rows


def print_recorded(rows: list[dict[str, Any]]) -> None:
    """The recorded figure beside the harness's figure now and conv_loop's, per direction."""
    print(f"\n{'id':44} {'dir':10} {'recorded':>9} {'harness':>9} {'native':>9} {'h/native':>8} {'rec/native':>10}")
    for r in rows:
        if "ratio" in r:
            print(f"{r['id']:44} {r['direction']:10} {r['recorded_us']:9.2f} {r['harness_us']:9.2f} "
                  f"{r['native_best_us']:9.2f} {r['ratio']:8.3f} {r['recorded_us'] / r['native_best_us']:10.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="a deepbench-run results folder (results.jsonl, plan.json)")
    ap.add_argument("--only", metavar="GLOB", help="results whose id matches, e.g. 'conv/inference_server/*/fp16'")
    ap.add_argument("--shard", type=sbs.parse_shard, default=(0, 1), metavar="I/N",
                    help="every N-th result from the I-th (native_side_by_side.py --merge sums parts up)")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"turns per result (default {ROUNDS})")
    ap.add_argument("--min-us", type=float, default=sbs.MIN_US, metavar="US",
                    help=f"leave out directions recorded under US (default {sbs.MIN_US:g}, the targets' cut)")
    ap.add_argument("--max-seconds", type=float, default=sbs.MIN_SECONDS, metavar="S",
                    help=f"conv_loop times each direction this long each way per turn (default {sbs.MIN_SECONDS:g})")
    ap.add_argument("--warm-up", type=float, default=sbs.WARM_UP_S, metavar="S",
                    help=f"the harness's warm-up before its first measurement (default {sbs.WARM_UP_S:g}; 0: none)")
    ap.add_argument("--no-kernel-time", action="store_true",
                    help="the harness times with its CUDA graph and events, CUPTI never started (deepbench-run "
                         "--no-kernel-time); once started, CUPTI stays in the process and adds to conv_loop's "
                         "event-timed figures")
    ap.add_argument("--library", type=Path, default=LIBRARY, help=f"conv_loop as a library (default {LIBRARY})")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the rows and the summary here")
    args = ap.parse_args(argv)
    try:
        if args.rounds < 1:
            raise sbs.UsageError("--rounds must be 1 or more")
        results = [r for r in sbs.select_results([args.folder], args.only, args.shard) if r.op == "conv"]
        problems, notes = sbs.build_problems(results, 0.0, args.min_us, args.max_seconds)
        for note in notes:
            print(f"# skipped: {note}")
        if not problems:
            raise sbs.UsageError("no convolution result with a cuDNN plan name to run (see the notes above)")
        rows = interleave(args.folder, results, problems, args)
    except sbs.UsageError as exc:
        print(f"conv_interleaved: {exc}", file=sys.stderr)
        return 2
    sbs.print_rows(rows)
    print_recorded(rows)
    summaries, ok = sbs.summarize(rows)
    if args.json:
        args.json.write_text(json.dumps({"folder": str(args.folder), "rounds": args.rounds,
                                         "kernel_time": not args.no_kernel_time, "rows": rows,
                                         "summary": summaries, "skipped": notes}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
