"""GEMMs and convolutions beside their native loops in one process, taken in turns (issue 20's
evidence; a script, not a unit test: needs an NVIDIA GPU, the native backends' bindings and
build_native.sh's libgemm_loop.so / libconv_loop.so).

native_side_by_side.py sets the figure a suite run recorded beside a loop run minutes later in a
process of its own. On a power-capped H100 the two then run at different clocks: short fp16 GEMMs
(20-30 us) differed by 5-12% with the loop's clock 2-8% lower (results/fp16-gemm-clocks-h100), and
short convolutions by 3-8% on the very same plan (results/conv-process-probe-h100). So this script
sets the two side by side where both see the same GPU, the same process and the same stretch of the
power limiter, in ROUNDS turns per result:

  harness  the harness's own measurement of the kernel: kernels.harness.execute.run_item, with the
           run's settings (plan.json: timer, stop rule, kernel time) and each convolution direction
           pinned to the cuDNN plan its result recorded, as `deepbench verify` re-runs a submission;
           the warm-up call, the timing and the check all run as in the suite;
  native   the loop's own code (the same C++ source as the gemm_loop / conv_loop programs, built as a
           library) on the lines native_side_by_side.py hands the programs: DeepBench's cublasGemmEx,
           or the direction's graph on that plan by name, on the padded sizes; a host loop and a
           graph, the better of the two.

The turns alternate which side goes first (harness first in the first round, native first in the
second, ...), so that neither always runs on the clock the other leaves behind. Per part: the median
of the harness's figures over the median of the loop's, the median clocks of both, and the recorded
figure beside them. The SUMMARY lines and the targets are native_side_by_side.py's.

Give --no-kernel-time for a comparison: once the harness has started CUPTI in the process, the loops'
waited-for samples read 5-12% slower (tests/benchmarks/results/server-conv-fp16-interleaved-h100/).
--trace records every turn with CUPTI (so its SUMMARY is not a comparison) and prints, per GEMM,
both sides' kernel: its name, its own duration on the GPU and the gap before the next call, which
tells a different kernel or launch from the same kernel at another clock.

    bash tests/benchmarks/build_native.sh
    python tests/benchmarks/interleaved.py RESULTS_DIR --only 'gemm/inference_server/*/fp16' \
        --no-kernel-time --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import signal
import statistics
import sys
import time
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import native_side_by_side as sbs  # beside this file: the loops' lines, rows and SUMMARY lines
from loop_library import LIBRARIES, LoopLibrary

from deepbench.kernels.backends.cudnn.declaration import CUDNN, recorded_engines
from deepbench.kernels.results import PLAN_FILE, KernelResult, Plan, PlanItem, Settings, Status

ROUNDS = 3
SIDES = ("harness", "native")  # the first round's order; the next round reverses it
TRACE_GAP_US = 5.0  # --trace: a gap longer than this between two calls is not back-to-back launching


def harness_settings(folder: Path, results: list[KernelResult], warm_up_s: float, kernel_time: bool) -> Settings:
    """The run's settings (its plan.json), each direction pinned to the plan it recorded; CUPTI's
    kernel time only where the run used it and `kernel_time` allows."""
    path = folder / PLAN_FILE
    try:
        plan = Plan.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise sbs.UsageError(f"{path}: not a deepbench-run plan ({str(exc).splitlines()[0]})") from None
    return plan.settings.model_copy(
        update={
            "backend_options": {
                **plan.settings.backend_options,
                CUDNN.name: CUDNN.stored(
                    CUDNN.options_of(plan.settings).model_copy(update={"engines": recorded_engines(results)})
                ),
            },
            "warm_up_s": warm_up_s,
            "kernel_time": plan.settings.kernel_time and kernel_time,
        }
    )


def harness_figures(backend: Any, r: KernelResult, settings: Settings) -> dict[str, tuple[float, float]]:
    """direction -> the harness's median us and median SM clock (NaN where unread) for result `r`'s
    kernel, measured now (run_item)."""
    from deepbench.kernels.harness.execute import run_item

    again = run_item(backend, PlanItem(kernel=r.kernel, precision=r.precision.name), settings)
    if again.status is not Status.OK:
        raise RuntimeError(f"{r.id}: {again.status.value}: {again.reason}")
    return {p.direction: (p.measurement.stats.median, sbs.median_clock(p)) for p in again.parts}


def native_rows(loop: LoopLibrary, problems: list[sbs.Problem]) -> dict[str, dict[str, Any]]:
    """direction -> native_side_by_side's row for one turn of the loop over `problems` (one result's)."""
    lines = [p.line for p in problems]
    out = loop.run(lines)
    if problems[0].op == "gemm":
        return {p.direction: sbs.make_row(p, sbs.parse_gemm_output(out, lines), {}) for p in problems}
    conv = sbs.parse_conv_output(out)
    return {p.direction: sbs.make_row(p, {}, conv) for p in problems}


def kernel_trace(events: list[tuple[float, float, str]]) -> dict[str, Any]:
    """A turn's commonest kernel (the timed call's, for a one-kernel GEMM): its name, how often it ran,
    the median of its own durations and of the gaps between one run and the next (those under
    TRACE_GAP_US: back-to-back launches, in a graph or a host loop)."""
    if not events:
        return {}
    name, count = Counter(e[2] for e in events).most_common(1)[0]
    runs = [e for e in events if e[2] == name]
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(runs) if 0 <= b[0] - a[1] < TRACE_GAP_US]
    return {
        "kernel": name,
        "runs": count,
        "kernel_us": statistics.median(e[1] - e[0] for e in runs),
        "gap_us": statistics.median(gaps) if gaps else math.nan,
    }


def recording(trace: bool) -> AbstractContextManager[Any]:
    """CUPTI's record of what the block runs (--trace), else nothing."""
    if not trace:
        return nullcontext()
    from deepbench.kernels.timing import cupti

    return cupti.recording()


def traced(trace: bool, prof: Any) -> dict[str, Any]:
    if not trace:
        return {}
    from deepbench.kernels.timing import cupti

    return kernel_trace(cupti.device_events(prof))


def summary_row(
    p: sbs.Problem,
    harness: list[tuple[float, float]],
    native: list[dict[str, Any]],
    error: str,
    traces: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """One part's row over its turns: medians of both sides' figures and clocks."""
    row = {
        "id": p.result_id,
        "op": p.op,
        "precision": p.precision,
        "direction": p.direction,
        "recorded_us": p.harness_us,
        "line": p.line,
    }
    if p.op == "conv":
        row.update(plan_name=p.plan, engine=p.engine)
    turns = [n for n in native if "native_best_us" in n]
    if error or len(turns) < len(native) or not turns:
        row["error"] = error or next((n["error"] for n in native if "error" in n), "no rounds")
        row["harness_us"] = p.harness_us  # where no turn ran: the recorded figure
        return row
    row.update(
        harness_us=statistics.median(h for h, _ in harness),
        harness_rounds=[h for h, _ in harness],
        native_us=statistics.median(n["native_us"] for n in turns),
        native_graph_us=statistics.median(n["native_graph_us"] for n in turns),
        native_rounds=[n["native_best_us"] for n in turns],
    )
    row["native_best_us"] = statistics.median(row["native_rounds"])
    row["ratio"] = row["harness_us"] / row["native_best_us"]
    clocks = [mhz for _, mhz in harness if not math.isnan(mhz)]
    native_clocks = [n["native_best_mhz"] for n in turns if "native_best_mhz" in n]
    if clocks and native_clocks:
        row.update(harness_mhz=statistics.median(clocks), native_best_mhz=statistics.median(native_clocks))
        row["cycle_ratio"] = row["ratio"] * row["harness_mhz"] / row["native_best_mhz"]
    if any(traces.values()):
        row["trace"] = traces
    return row


def interleave(
    folder: Path, results: list[KernelResult], problems: list[sbs.Problem], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """ROUNDS turns per result of the harness's measurement and the loop's, alternating which goes
    first; a row per part."""
    settings = harness_settings(folder, results, args.warm_up, not args.no_kernel_time)
    loops: dict[str, LoopLibrary] = {}
    backends: dict[str, Any] = {}
    by_result: dict[str, list[sbs.Problem]] = {}
    for p in problems:
        by_result.setdefault(p.result_id, []).append(p)
    rows, started = [], time.monotonic()
    try:
        for i, r in enumerate(x for x in results if x.id in by_result):
            rows += interleave_result(r, by_result[r.id], settings, loops, backends, args)
            print(f"# {i + 1} results, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    except KeyboardInterrupt:  # also SIGTERM (main): the rows measured so far are kept
        print(f"# interrupted: {len({row['id'] for row in rows})} results measured", file=sys.stderr, flush=True)
    return rows


def interleave_result(
    r: KernelResult,
    mine: list[sbs.Problem],
    settings: Settings,
    loops: dict[str, LoopLibrary],
    backends: dict[str, Any],
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    """One result's turns; its rows."""
    from deepbench.kernels.backends import load_backend

    if r.op not in loops:
        try:
            loops[r.op] = LoopLibrary(r.op, getattr(args, f"{r.op}_library"))
        except FileNotFoundError as exc:
            raise sbs.UsageError(str(exc)) from None
    if r.backend not in backends:
        backends[r.backend] = load_backend(r.backend, settings)
    loop, backend = loops[r.op], backends[r.backend]
    harness: dict[str, list[tuple[float, float]]] = {p.direction: [] for p in mine}
    native: dict[str, list[dict[str, Any]]] = {p.direction: [] for p in mine}
    traces: dict[str, list[dict[str, Any]]] = {"harness": [], "native": []}
    for turn in range(args.rounds):
        for side in SIDES if turn % 2 == 0 else SIDES[::-1]:
            with recording(args.trace) as prof:
                if side == "harness":
                    try:
                        figures = harness_figures(backend, r, settings)
                    except RuntimeError as exc:
                        return [summary_row(p, [], [], str(exc), traces) for p in mine]
                else:
                    turn_rows = native_rows(loop, mine)
            traces[side].append(traced(args.trace, prof))
        for p in mine:
            harness[p.direction].append(figures[p.direction])
            native[p.direction].append(turn_rows[p.direction])
    return [summary_row(p, harness[p.direction], native[p.direction], "", traces) for p in mine]


def interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def print_recorded(rows: list[dict[str, Any]]) -> None:
    """The recorded figure beside the harness's figure now and the loop's, per part."""
    print(f"\n{'id':44} {'dir':10} {'recorded':>9} {'harness':>9} {'native':>9} {'h/native':>8} {'rec/native':>10}")
    for r in rows:
        if "ratio" in r:
            print(
                f"{r['id']:44} {r['direction']:10} {r['recorded_us']:9.2f} {r['harness_us']:9.2f} "
                f"{r['native_best_us']:9.2f} {r['ratio']:8.3f} {r['recorded_us'] / r['native_best_us']:10.3f}"
            )


def print_traces(rows: list[dict[str, Any]]) -> None:
    """--trace: per result, both sides' commonest kernel under CUPTI, medians over the turns."""
    print(
        f"\nTRACE (CUPTI attached: these figures, not the SUMMARY, are the comparison)\n"
        f"{'id':44} {'h_kernel_us':>11} {'n_kernel_us':>11} {'h/n':>6} {'h_gap_us':>8} {'n_gap_us':>8} "
        f"same  kernel"
    )
    for r in rows:
        t = r.get("trace")
        if not t or not all(t[side] and all(t[side]) for side in SIDES):
            continue
        h = {k: statistics.median(x[k] for x in t["harness"]) for k in ("kernel_us", "gap_us")}
        n = {k: statistics.median(x[k] for x in t["native"]) for k in ("kernel_us", "gap_us")}
        names = {x["kernel"] for side in SIDES for x in t[side]}
        print(
            f"{r['id']:44} {h['kernel_us']:11.2f} {n['kernel_us']:11.2f} {h['kernel_us'] / n['kernel_us']:6.3f} "
            f"{sbs.fmt(h['gap_us'], '8.2f')} {sbs.fmt(n['gap_us'], '8.2f')} {'yes ' if len(names) == 1 else 'NO  '}"
            f"  {' | '.join(sorted(name[:100] for name in names))}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="a deepbench-run results folder (results.jsonl, plan.json)")
    ap.add_argument("--only", metavar="GLOB", help="results whose id matches, e.g. 'gemm/inference_server/*/fp16'")
    ap.add_argument(
        "--shard",
        type=sbs.parse_shard,
        default=(0, 1),
        metavar="I/N",
        help="every N-th result from the I-th (native_side_by_side.py --merge sums parts up)",
    )
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"turns per result (default {ROUNDS})")
    ap.add_argument(
        "--min-us",
        type=float,
        default=sbs.MIN_US,
        metavar="US",
        help=f"leave out parts recorded under US (default {sbs.MIN_US:g}, the targets' cut)",
    )
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=sbs.MIN_SECONDS,
        metavar="S",
        help=f"the loop times each part this long each way per turn (default {sbs.MIN_SECONDS:g})",
    )
    ap.add_argument(
        "--warm-up",
        type=float,
        default=sbs.WARM_UP_S,
        metavar="S",
        help=f"the harness's warm-up before its first measurement (default {sbs.WARM_UP_S:g}; 0: none)",
    )
    ap.add_argument(
        "--no-kernel-time",
        action="store_true",
        help="the harness times with its CUDA graph and events, CUPTI never started (deepbench-run "
        "--no-kernel-time); once started, CUPTI stays in the process and adds to the loops' "
        "event-timed figures",
    )
    ap.add_argument(
        "--trace",
        action="store_true",
        help="record every turn with CUPTI and print both sides' kernel, its duration and the gap "
        "between calls (a diagnosis: CUPTI then slows the event-timed figures)",
    )
    for op, (path, _) in LIBRARIES.items():
        ap.add_argument(f"--{op}-library", type=Path, default=path, help=f"{op}'s loop as a library (default {path})")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the rows and the summary here")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, interrupt)  # `timeout`'s: keep the rows measured so far, as Ctrl-C does
    try:
        if args.rounds < 1:
            raise sbs.UsageError("--rounds must be 1 or more")
        results = sbs.select_results([args.folder], args.only, args.shard)
        problems, notes = sbs.build_problems(results, 0.0, args.min_us, args.max_seconds)
        for note in notes:
            print(f"# skipped: {note}")
        if not problems:
            raise sbs.UsageError(
                "no GEMM with a cublasGemmEx record or convolution with a cuDNN plan name to run (see the notes above)"
            )
        rows = interleave(args.folder, results, problems, args)
    except sbs.UsageError as exc:
        print(f"interleaved: {exc}", file=sys.stderr)
        return 2
    sbs.print_rows(rows)
    print_recorded(rows)
    if args.trace:
        print_traces(rows)
    summaries, ok = sbs.summarize(rows)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "folder": str(args.folder),
                    "rounds": args.rounds,
                    "kernel_time": not args.no_kernel_time,
                    "trace": args.trace,
                    "rows": rows,
                    "summary": summaries,
                    "skipped": notes,
                },
                indent=1,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
