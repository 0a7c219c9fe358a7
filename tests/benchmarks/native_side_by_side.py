"""Native side-by-side (issue 20's evidence; a script, not a unit test: needs an NVIDIA GPU and the
loops tests/benchmarks/build_native.sh builds).

Does the harness time NVIDIA's libraries as a plain C++ program calling them would? For every `ok`
GEMM and convolution result of one or more deepbench-run results folders, the very problem the
harness timed, as its result records it, is run again by a native loop on the same GPU, for as
long as the harness measured it (samples x median x calls per sample, at least MIN_SECONDS):
  GEMM  gemm_loop: cublasGemmEx with the result's `blas_call` (transa, transb, m, n, k as padded;
        lda/ldb/ldc as recorded, which the loop derives the same way), the precision's types;
  conv  conv_loop: the direction's cuDNN graph (the harness's layouts and types, the padded sizes)
        on exactly the plan the result names (info.cudnn.plan_name, found among cuDNN's heuristic
        plans: the engine id and listed knobs alone can re-create another plan), and, for the choice, every
        candidate cuDNN's heuristics offer under the harness's candidate policy, each timed for
        --candidate-seconds.
Both loops time two ways: a host loop of calls (DeepBench's way; launch-bound for calls under ~5-8 us)
and the same calls captured in a CUDA graph (the harness's way, without Python). Each kernel's
ratio harness / native uses the BETTER (smaller) of the two native times; both are printed.
Before the first problem a large fp16 GEMM runs for --warm-up seconds, since the harness measures
on a GPU at its working temperature (kernels/timing/warmup.py) and the clocks depend on it.
Both sides read the SM clock beside their samples (the harness: measurement.clocks_mhz; the loops:
NVML, per trial), and each GEMM row shows the two median clocks. On a GPU at its power cap the clock
moves with how long the card has been under load, so the two sides may time the same problem at
different clocks; a CLOCKS line per (operation, precision) then says how many ratios fall within the
band once each time is taken in cycles (us x MHz). It is a diagnosis, not the target (the targets are
the SUMMARY lines): a reading is a point, and under the limiter the clock swings within a trial, so
cycles are an estimate (a memory-bound kernel's time does not follow the SM clock at all).
For convolutions it also prints the chosen engine's native time over the fastest candidate's
(both timed alike in the candidate pass), with both engine ids; the fastest is taken among the
candidates the harness did not reject (a rejected engine computed wrong results), and its harness
status says whether it was checked (`passed`) or only timed slower by the harness (`unchecked`).

Summary lines per (operation, precision), over parts of MIN_US (20 us) or more: how many have
harness / native within [0.95, 1.05], min / median / max, how many are outside [0.8, 1.25]; for
convolutions, how many chosen engines are within 5% of the fastest candidate. Issue 20's targets:
>= 95% within [0.95, 1.05] and none outside [0.8, 1.25]; every chosen engine within 5%.

    bash tests/benchmarks/build_native.sh
    python tests/benchmarks/native_side_by_side.py RESULTS_DIR [...] --json side-by-side.json
    python tests/benchmarks/native_side_by_side.py RESULTS_DIR --shard 0/2 --json a.json   # in parts,
    python tests/benchmarks/native_side_by_side.py --merge a.json b.json [--json all.json]  # then summed up
    python tests/benchmarks/native_side_by_side.py RESULTS_DIR --dry-run   # the loops' input, no GPU needed
    python tests/benchmarks/native_side_by_side.py RESULTS_DIR --find-first --candidate-seconds 0.01
        # convolutions in DeepBench's conv_bench order: each direction's candidates, then its plan pinned
    python tests/benchmarks/native_side_by_side.py RESULTS_DIR --min-us 0 --rest-as-harness
        # GEMMs in the harness's order, each after the pause the harness had before measuring it

Results without the native backends' records (no `blas_call`, no `info.cudnn`: PyTorch-backend
results) are skipped with a note.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from deepbench.kernels.backends.cudnn.engine_choice import is_plan_name
from deepbench.kernels.results import RESULTS_FILE, KernelResult, Status
from deepbench.kernels.results_file import exists, read_results

HERE = Path(__file__).resolve().parent
DEFAULT_BIN = HERE.parent.parent / "build" / "native"
MIN_SECONDS = 0.2  # a native problem runs at least this long each way
CANDIDATE_SECONDS = 0.1  # each candidate engine, each way
MIN_US = 20.0  # issue 20's targets hold for parts this long or longer
WITHIN = (0.95, 1.05)
OUTSIDE = (0.8, 1.25)
WITHIN_SHARE = 0.95
CHOICE_MARGIN = 1.05  # chosen engine within 5% of the fastest candidate
CLOCK_APART = 0.02  # the CLOCKS line counts parts whose two sides' median clocks differ more
MAX_REST_S = 1.0  # --rest-as-harness: the longest pause before a problem
WARM_UP_S = 20.0  # seconds of a large fp16 GEMM before the first native problem
WARM_UP_LINE = "fp16 N N 8192 8192 8192 {seconds:.1f} default"  # kernels/timing/warmup.py's WARM_GEMM
GRAPH_FIRST_ENV = "LOOP_GRAPH_FIRST"  # loop_timing.h: time the graph before the host loop (--graph-first)
PROGRESS_EVERY = 20  # loop output lines between progress lines on stderr
CONV_FIELDS = 15  # conv_loop's input fields, echoed at the start of its output lines
CONV_LAYOUTS = ("nchw", "nhwc")  # conv_loop's optional 16th field (not echoed): the layout the result records
# gemm_loop's precisions, named as the harness names them (fp16acc16: DeepBench's half call, fp16 compute)
GEMM_PRECISIONS = ("fp32", "tf32", "fp16", "fp16acc16", "bf16", "int8")
# --deepbench-call: gemm_loop's precision for the call DeepBench's gemm_bench made (half: CUDA_R_16F compute)
DEEPBENCH_CALL = {"fp16": "fp16acc16"}
# cuBLAS math mode per harness backend (gemm_loop's MATH field): the PyTorch backend forbids
# fp16/bf16 split-K reductions (pytorch/context.py), the cuBLAS backend too except in fp16acc16,
# whose handle keeps the default math (cublas/declaration.py MATH_MODES): the record's math_mode says which.
GEMM_MATH = {"torch": "strict", "cublas": "strict"}
GEMM_MATH_DEFAULT = "default"
RECORDED_MATH = {"CUBLAS_DEFAULT_MATH": "default"}  # a recorded math_mode -> gemm_loop's MATH
NOT_LISTED = "not in the harness's list"


class UsageError(Exception):
    """Bad input: one line and exit status 2."""


@dataclass
class Problem:
    """One native problem: the line a loop reads, and what the harness measured for it."""

    op: str  # gemm | conv
    result_id: str
    precision: str
    direction: str
    harness_us: float
    line: str  # the pinned problem (gemm_loop or conv_loop input)
    harness_mhz: float = math.nan  # the median SM clock beside the harness's samples (NaN where not read)
    candidates_line: str = ""  # conv: the same problem with ENGINE `-`
    engine: str = ""  # conv: the harness's engine as recorded (ENGINE_ID:KNOBS, knobs by name)
    plan: str = ""  # conv: the chosen plan's name, which conv_loop is pinned to and prints
    # conv: plan name -> the harness's record of that candidate (its engine spec, status ...)
    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)
    compared: bool = True  # False: a part under --min-us whose candidates run only as history (--find-first)

    def status(self, plan: str) -> str:
        """The harness's verdict on a candidate: chosen, passed, rejected, unchecked (or not listed)."""
        return str(self.candidates.get(plan, {}).get("status", NOT_LISTED))


# ----- from results to the loops' input -----------------------------------------------------


def harness_seconds(part: Any) -> float:
    """How long the harness measured a part: samples x median x calls per sample."""
    m = part.measurement
    return float(m.stats.n * m.stats.median * m.calls_per_sample / 1e6)


def measured_seconds(part: Any, max_seconds: float | None = None) -> float:
    """How long a native loop times a part each way: as long as the harness measured it, at least
    MIN_SECONDS, at most `max_seconds` where given (--max-seconds: so that a side-by-side of hundreds
    of parts fits a lent GPU's 10 minutes a command; the figure is then a median over a shorter
    stretch of the GPU's power states than the harness's)."""
    seconds = max(MIN_SECONDS, harness_seconds(part))
    return min(seconds, max_seconds) if max_seconds else seconds


def median_clock(part: Any) -> float:
    """The median SM clock the harness read beside a part's samples; NaN where it read none."""
    clocks = part.measurement.clocks_mhz
    return float(statistics.median(clocks)) if clocks else math.nan


def harness_rest(r: KernelResult) -> float:
    """Seconds the harness spent on a one-part result outside its measurement: the kernel's span
    less the measured samples, the samples left out while the clock settled, and the device warm-up
    (a first kernel's, GPU busy); at most MAX_REST_S. The GPU idles or runs light work (inputs, the
    check, the graph capture) then, and at the power cap such an idle lets the limiter raise the clock
    for what follows: --rest-as-harness gives the native loop the same pause, to see whether that
    explains a difference (measured: it did not, on its own; results/fp16-gemm-clocks-h100)."""
    part = r.parts[0]
    busy = (
        harness_seconds(part)
        + part.info.get("clock_settle", {}).get("seconds", 0.0)
        + part.info.get("device_warm_up", {}).get("seconds", 0.0)
    )
    return min(MAX_REST_S, max(0.0, (r.ended_at - r.started_at).total_seconds() - busy))


def gemm_problem(
    r: KernelResult, max_seconds: float | None = None, rest_as_harness: bool = False, deepbench_call: bool = False
) -> Problem:
    """gemm_loop's line for a GEMM result (ValueError: why it has none); with `rest_as_harness`, the
    loop idles before the problem as long as the harness spent outside its measurement (harness_rest).
    The loop draws its operands as the result records the harness drew them (normal where it records
    none); with `deepbench_call`, an fp16 problem makes DeepBench's own call, fp16 accumulate."""
    part = r.parts[0]
    call = part.info.get("blas_call")
    if not call:
        raise ValueError("no blas_call in its record (not the cuBLAS backend)")
    ta, tb, m, n, k = call["transa"], call["transb"], call["m"], call["n"], call["k"]
    derived = {"lda": k if ta == "T" else m, "ldb": n if tb == "T" else k, "ldc": m}
    recorded = {name: call.get(name) for name in derived}
    if not any(recorded.values()):
        raise ValueError("its blas_call has no lda/ldb/ldc (a PyTorch-backend record: torch's call, not cublasGemmEx)")
    if recorded != derived:
        raise ValueError(f"recorded {recorded} differ from DeepBench's {derived}, which gemm_loop uses")
    if r.precision.name.value not in GEMM_PRECISIONS:
        raise ValueError(f"gemm_loop has no {r.precision.name.value}")
    math_mode = RECORDED_MATH.get(part.info.get("math_mode", ""), GEMM_MATH.get(r.backend, GEMM_MATH_DEFAULT))
    precision = r.precision.name.value
    if deepbench_call:
        precision = DEEPBENCH_CALL.get(precision, precision)
    line = f"{precision} {ta} {tb} {m} {n} {k} {measured_seconds(part, max_seconds):.3f} {math_mode}"
    inputs = r.inputs or "normal"  # gemm_loop's default
    if rest_as_harness or inputs != "normal":
        line += f" {harness_rest(r) if rest_as_harness else 0.0:.3f}"
    if inputs != "normal":
        line += f" {inputs}"
    return Problem(
        "gemm",
        r.id,
        r.precision.name.value,
        part.direction,
        part.measurement.stats.median,
        line,
        harness_mhz=median_clock(part),
    )


def conv_problems(
    r: KernelResult,
    candidate_seconds: float,
    min_us: float = 0.0,
    max_seconds: float | None = None,
    find_first: bool = False,
) -> tuple[list[Problem], list[str]]:
    """conv_loop's lines for each direction of a convolution result, and notes on the directions
    skipped. Plans are named as cuDNN names them (info.cudnn.plan_name, every knob included): the
    engine id and cudnn-frontend's knob list can miss a knob (engine 49's split-K), so they could
    re-create another plan, and two candidates can share them. With `find_first`, a direction under
    `min_us` still runs its candidates (not compared): the harness raced them too."""
    kk = r.kernel
    sizes = {d: r.padding.get(d, getattr(kk, d)) for d in ("n", "c", "h", "w", "k")}
    shape = (
        f"{sizes['n']} {sizes['c']} {sizes['h']} {sizes['w']} {sizes['k']} {kk.r} {kk.s} "
        f"{kk.pad_h} {kk.pad_w} {kk.stride_h} {kk.stride_w}"
    )
    problems, notes = [], []
    for part in r.parts:
        short = part.measurement.stats.median < min_us
        if short and not (find_first and candidate_seconds > 0):
            continue
        rec = part.info.get("cudnn")
        plan = str((rec or {}).get("plan_name", ""))
        if not is_plan_name(plan):
            notes.append(f"{r.id} {part.direction}: no cuDNN plan name in its record (not the cuDNN backend)")
            continue
        head = f"{r.precision.name.value} {part.direction} {shape}"
        layout = str(part.info.get("layout", "")).lower()  # conv_loop's optional LAYOUT: the harness's
        tail = f" {layout}" if layout in CONV_LAYOUTS else ""
        problems.append(
            Problem(
                "conv",
                r.id,
                r.precision.name.value,
                part.direction,
                part.measurement.stats.median,
                line=f"{head} {plan} {measured_seconds(part, max_seconds):.3f}{tail}",
                candidates_line=f"{head} - {candidate_seconds:.3f}{tail}" if candidate_seconds > 0 else "",
                engine=str(rec.get("engine", "")),
                plan=plan,
                candidates={str(c.get("plan_name")): c for c in rec.get("candidates", [])},
                compared=not short,
            )
        )
    return problems, notes


def select_results(folders: list[Path], only: str | None, shard: tuple[int, int]) -> list[KernelResult]:
    """The ok GEMM and convolution results of the folders, filtered by id pattern and shard."""
    out = []
    for folder in folders:
        path = folder / RESULTS_FILE
        if not exists(path):  # results.jsonl, or a published run's results.jsonl.gz
            raise UsageError(f"{folder} has no {RESULTS_FILE}: not a deepbench-run results folder")
        try:
            results = read_results(path)
        except ValueError as exc:
            raise UsageError(f"{path} is malformed: {str(exc).splitlines()[0]}") from None
        out += [r for r in results if r.op in ("gemm", "conv") and (only is None or fnmatch.fnmatch(r.id, only))]
    index, count = shard
    return [r for i, r in enumerate(out) if i % count == index]


def build_problems(
    results: Iterable[KernelResult],
    candidate_seconds: float,
    min_us: float = 0.0,
    max_seconds: float | None = None,
    find_first: bool = False,
    rest_as_harness: bool = False,
    deepbench_call: bool = False,
) -> tuple[list[Problem], list[str]]:
    """The loops' problems for `results` and notes on what was skipped; parts the harness timed under
    `min_us` are left out (--min-us), native timings last at most `max_seconds` (--max-seconds)."""
    problems: list[Problem] = []
    notes: list[str] = []
    for r in results:
        if r.status is not Status.OK:
            notes.append(f"{r.id}: {r.status.value}, skipped")
            continue
        if r.op == "gemm" and r.parts and r.parts[0].measurement.stats.median < min_us:
            continue
        if r.op == "gemm":
            try:
                problems.append(gemm_problem(r, max_seconds, rest_as_harness, deepbench_call))
            except ValueError as exc:
                notes.append(f"{r.id}: {exc}")
        else:
            ps, ns = conv_problems(r, candidate_seconds, min_us, max_seconds, find_first)
            problems += ps
            notes += ns
    return problems, notes


def loop_inputs(problems: list[Problem], find_first: bool = False) -> tuple[list[str], list[str]]:
    """gemm_loop's and conv_loop's stdin lines, each distinct line once (results may repeat a problem);
    a convolution's candidates after its pinned plan, or before it with `find_first`. A part that is not
    compared has no pinned line."""
    gemm = list(dict.fromkeys(p.line for p in problems if p.op == "gemm"))
    conv = list(
        dict.fromkeys(
            line
            for p in problems
            if p.op == "conv"
            for line in (
                (p.candidates_line, p.line if p.compared else "") if find_first else (p.line, p.candidates_line)
            )
            if line
        )
    )
    return gemm, conv


# ----- running the loops ---------------------------------------------------------------------


def run_loop(
    binary: Path, lines: list[str], what: str, env: dict[str, str] | None = None, sink: TextIO | None = None
) -> tuple[list[str], str]:
    """The loop's output lines and its stderr, with progress on stderr (`env`: the loop's environment,
    default this process's; `sink`: a file each output line is also written to as it comes, so that a
    run cut short keeps what it measured). Input is written from a thread so that neither pipe can fill
    up while the other waits."""
    if not binary.is_file():
        raise UsageError(f"no {binary}: build the native loops first (bash tests/benchmarks/build_native.sh)")
    proc = subprocess.Popen(
        [str(binary)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        env=env,
    )
    assert proc.stdin and proc.stdout and proc.stderr

    def feed() -> None:
        proc.stdin.write("".join(line + "\n" for line in lines))
        proc.stdin.close()

    errors: list[str] = []
    threading.Thread(target=feed, daemon=True).start()
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    reader.start()
    out = []
    started = time.monotonic()
    for line in proc.stdout:
        out.append(line.rstrip("\n"))
        if sink:
            sink.write(line)
            sink.flush()
        if len(out) % PROGRESS_EVERY == 0:
            print(f"# {what}: {len(out)} lines, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    proc.wait()
    reader.join()
    print(
        f"# {what}: {len(out)} lines for {len(lines)} problems in {time.monotonic() - started:.0f} s", file=sys.stderr
    )
    if proc.returncode != 0:
        print(f"# {what} ended with status {proc.returncode}: {''.join(errors[-3:]).strip()}", file=sys.stderr)
    return out, "".join(errors)


def loop_version(stderr: str, library: str) -> str | None:
    """The `# LIBRARY VERSION` line a loop prints first."""
    for line in stderr.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[:2] == ["#", library]:
            return parts[2]
    return None


GEMM_FIELDS = 9  # gemm_loop's figures: the problem (6), us, calls, graph us
GEMM_CLOCK_FIELDS = 11  # then the median SM clock each way (older builds print none)


def parse_gemm_output(lines: list[str], inputs: list[str]) -> dict[str, dict[str, Any]]:
    """gemm_loop prints one line per input line, in order: input line -> figures or error."""
    out = {}
    for line_in, line_out in zip(inputs, lines, strict=False):
        f = line_out.split()
        if len(f) >= 7 and f[6] == "error":
            out[line_in] = {"error": " ".join(f[7:])}
        elif len(f) in (GEMM_FIELDS, GEMM_CLOCK_FIELDS):
            out[line_in] = {"native_us": float(f[6]), "calls": int(f[7]), "native_graph_us": float(f[8])}
            if len(f) == GEMM_CLOCK_FIELDS:
                out[line_in].update(native_mhz=float(f[9]), native_graph_mhz=float(f[10]))
        else:
            out[line_in] = {"error": f"unexpected output '{line_out}'"}
    return out


def echoed(line: str) -> str:
    """The fields of a conv_loop input line its output lines start with (not the optional LAYOUT)."""
    return " ".join(line.split()[:CONV_FIELDS])


def parse_conv_output(lines: list[str]) -> dict[str, dict[str, Any]]:
    """conv_loop's lines by their echoed input: {'engines': {plan name: figures}, 'order': [...],
    'error': problem error}. A plan's figures: its engine ('ID KNOBS', numeric knobs), us, graph_us
    (NaN if not capturable) or error."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"engines": {}, "order": []})
    for line in lines:
        f = line.split()
        key, rest = echoed(line), f[CONV_FIELDS:]
        entry = out[key]
        if rest and rest[0] == "error":
            entry["error"] = " ".join(rest[1:])
        elif len(rest) >= 4:
            plan, engine = rest[2], f"{rest[0]} {rest[1]}"
            entry["order"].append(plan)
            if rest[3] == "error":
                entry["engines"][plan] = {"engine": engine, "error": " ".join(rest[4:])}
            else:
                entry["engines"][plan] = {"engine": engine, "us": float(rest[3]), "graph_us": float(rest[4])}
    return dict(out)


# ----- rows and summaries -----------------------------------------------------------------------


def best(host_us: float, graph_us: float) -> float:
    """The better of the two native figures (NaN graph: the host loop's)."""
    return min(x for x in (host_us, graph_us) if not math.isnan(x))


def make_row(p: Problem, gemm: dict[str, dict], conv: dict[str, dict]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": p.result_id,
        "op": p.op,
        "precision": p.precision,
        "direction": p.direction,
        "harness_us": p.harness_us,
        "line": p.line,
    }
    if not math.isnan(p.harness_mhz):
        row["harness_mhz"] = p.harness_mhz
    if p.op == "gemm":
        figures = gemm.get(p.line, {"error": "no output from gemm_loop"})
        row.update(figures)
    else:
        entry = conv.get(echoed(p.line), {"error": "no output from conv_loop", "engines": {}})
        pinned = entry["engines"].get(p.plan, {})  # the pinned line times that one plan
        row.update(engine=p.engine, plan_name=p.plan)
        if "us" in pinned:
            row.update(native_us=pinned["us"], native_graph_us=pinned["graph_us"])
        else:
            row["error"] = entry.get("error") or pinned.get("error") or "the pinned engine printed no figures"
        if p.candidates_line:
            row.update(choice(p, conv.get(echoed(p.candidates_line))))
    if "native_us" in row:
        row["native_best_us"] = best(row["native_us"], row["native_graph_us"])
        row["ratio"] = p.harness_us / row["native_best_us"]
        add_clocks(row)
    return row


def add_clocks(row: dict[str, Any]) -> None:
    """The native clock of the way the ratio uses, and the ratio in cycles where both clocks are known."""
    graph = row["native_best_us"] == row["native_graph_us"]
    mhz = row.get("native_graph_mhz" if graph else "native_mhz", math.nan)
    if math.isnan(mhz):
        return
    row["native_best_mhz"] = mhz
    if "harness_mhz" in row:
        row["cycle_ratio"] = row["ratio"] * row["harness_mhz"] / mhz


def choice(p: Problem, entry: dict[str, Any] | None) -> dict[str, Any]:
    """The chosen engine against the fastest candidate the harness did not reject, both timed in
    the candidate pass."""
    if not entry:
        return {"choice_error": "no output for the candidates"}
    if entry.get("error"):
        return {"choice_error": entry["error"]}
    timed = {e: f for e, f in entry["engines"].items() if "us" in f}
    times = {e: best(f["us"], f["graph_us"]) for e, f in timed.items()}
    eligible = {e: t for e, t in times.items() if p.status(e) != "rejected"}
    out: dict[str, Any] = {
        "candidates_native": len(entry["order"]),
        "candidates_harness": len(p.candidates),
        "candidates_common": len(set(entry["order"]) & set(p.candidates)),
        "candidates": [{"plan": e, "status": p.status(e), **entry["engines"][e]} for e in entry["order"]],
    }
    if not eligible:
        out["choice_error"] = "no candidate the harness did not reject ran here"
        return out
    fastest = min(eligible, key=eligible.__getitem__)
    out.update(fastest_engine=fastest, fastest_us=eligible[fastest], fastest_status=p.status(fastest))
    if p.plan in times:
        out["chosen_candidate_us"] = times[p.plan]
        out["chosen_over_fastest"] = times[p.plan] / eligible[fastest]
    else:
        out["choice_error"] = f"the chosen plan {p.plan} was not among the candidates here"
    return out


def fmt(x: Any, spec: str = "9.2f") -> str:
    return format(x, spec) if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else "-"


def print_rows(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'id':44} {'prec':5} {'dir':10} {'harness_us':>10} {'native_us':>10} {'graph_us':>10} {'h/native':>8} "
        f"{'h_MHz':>5} {'n_MHz':>5} {'cycles':>6}  "
        f"conv: chosen plan, its candidate us / fastest's (plan, harness status)"
    )
    for r in rows:
        tail = r.get("error", "")
        if r["op"] == "conv" and not tail:
            tail = r["plan_name"]
            if "chosen_over_fastest" in r:
                tail += (
                    f"  {r['chosen_candidate_us']:.2f} / {r['fastest_us']:.2f} = {r['chosen_over_fastest']:.3f} "
                    f"({r['fastest_engine']}, {r['fastest_status']})"
                )
            elif "choice_error" in r:
                tail += f"  choice: {r['choice_error']}"
        print(
            f"{r['id']:44} {r['precision']:5} {r['direction']:10} {fmt(r['harness_us'], '10.2f')} "
            f"{fmt(r.get('native_us'), '10.2f')} {fmt(r.get('native_graph_us'), '10.2f')} "
            f"{fmt(r.get('ratio'), '8.3f')} {fmt(r.get('harness_mhz'), '5.0f')} "
            f"{fmt(r.get('native_best_mhz'), '5.0f')} {fmt(r.get('cycle_ratio'), '6.3f')}  {tail}"
        )


def summarize(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """SUMMARY lines per (operation, precision) over parts of MIN_US or more; whether every target holds."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["op"], r["precision"])].append(r)
    summaries, ok = [], True
    print()
    for (op, precision), group in sorted(groups.items()):
        # The cut is on the figure the run recorded (interleaved.py's rows measure the harness again).
        long_ = [r for r in group if r.get("recorded_us", r["harness_us"]) >= MIN_US]
        ratios = [r["ratio"] for r in long_ if "ratio" in r]
        s: dict[str, Any] = {
            "op": op,
            "precision": precision,
            "parts": len(group),
            "parts_min_us": len(long_),
            "compared": len(ratios),
            "errors": sum("ratio" not in r for r in group),
        }
        if ratios:
            within = sum(WITHIN[0] <= x <= WITHIN[1] for x in ratios)
            outside = sum(not OUTSIDE[0] <= x <= OUTSIDE[1] for x in ratios)
            s.update(
                within=within,
                outside=outside,
                min=min(ratios),
                median=statistics.median(ratios),
                max=max(ratios),
                passed=within >= WITHIN_SHARE * len(ratios) and outside == 0,
            )
            ok &= s["passed"]
            print(
                f"SUMMARY {op} {precision}: {len(ratios)} parts >= {MIN_US:g} us compared ({s['errors']} without a "
                f"native figure); harness/native within [{WITHIN[0]}, {WITHIN[1]}]: {within} "
                f"({100 * within / len(ratios):.1f}%); "
                f"min {s['min']:.3f} median {s['median']:.3f} max {s['max']:.3f}; "
                f"outside [{OUTSIDE[0]}, {OUTSIDE[1]}]: {outside}  {'PASS' if s['passed'] else 'FAIL'}"
            )
        else:
            print(
                f"SUMMARY {op} {precision}: no part >= {MIN_US:g} us with a native figure ({len(group)} parts, "
                f"{s['errors']} without one)"
            )
        clocked = [r for r in long_ if "cycle_ratio" in r]
        if clocked:
            cycles = [r["cycle_ratio"] for r in clocked]
            s.update(cycles_compared=len(cycles), cycles_within=sum(WITHIN[0] <= x <= WITHIN[1] for x in cycles))
            apart = sum(abs(r["harness_mhz"] / r["native_best_mhz"] - 1) > CLOCK_APART for r in clocked)
            print(
                f"CLOCKS {op} {precision}: {len(cycles)} parts with both clocks, {apart} timed at clocks more than "
                f"{100 * CLOCK_APART:.0f}% apart; in cycles (us x MHz) within [{WITHIN[0]}, {WITHIN[1]}]: "
                f"{s['cycles_within']} ({100 * s['cycles_within'] / len(cycles):.1f}%), median "
                f"{statistics.median(cycles):.3f}  (diagnosis, not a target)"
            )
        if op == "conv":
            chosen = [r["chosen_over_fastest"] for r in long_ if "chosen_over_fastest" in r]
            if chosen:
                close = sum(x <= CHOICE_MARGIN for x in chosen)
                s.update(
                    choice_compared=len(chosen),
                    choice_within=close,
                    choice_max=max(chosen),
                    choice_passed=close == len(chosen),
                )
                ok &= s["choice_passed"]
                print(
                    f"SUMMARY conv {precision} choice: {close} of {len(chosen)} chosen engines within "
                    f"{100 * (CHOICE_MARGIN - 1):.0f}% of the fastest candidate (worst {max(chosen):.3f})  "
                    f"{'PASS' if s['choice_passed'] else 'FAIL'}"
                )
        summaries.append(s)
    return summaries, ok


# ----- main --------------------------------------------------------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not I/N") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"'{text}': I must be in [0, N)")
    return i, n


def write_json(
    path: Path,
    versions: Any,
    folders: list[str],
    rows: list[dict[str, Any]],
    summaries: list[dict[str, Any]],
    skipped: list[str],
    shards: list[str] | None = None,
) -> None:
    """The side-by-side's JSON (--json), as a run and a merge of runs' parts (--merge, which reads it) write it."""
    data = {"versions": versions, "folders": folders, "summary": summaries, "skipped": skipped, "rows": rows}
    path.write_text(json.dumps(data if shards is None else {**data, "shards": shards}, indent=1))


def read_json(path: Path) -> dict[str, Any]:
    """A side-by-side JSON as write_json wrote it, or its gzipped copy (.gz, as evidence is kept)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return dict(json.load(f))


def merge(paths: list[Path], out: Path | None = None) -> int:
    """The parts' rows and summary, as one run would print them (and write them to `out`)."""
    rows, versions, folders, skipped = [], [], [], []
    for path in paths:
        try:
            data = read_json(path)
            rows += data["rows"]
            versions.append(data.get("versions", {}))
            folders += [f for f in data.get("folders", []) if f not in folders]
            skipped += data.get("skipped", [])
        except (OSError, ValueError, KeyError) as exc:
            raise UsageError(f"{path}: not a side-by-side JSON ({exc})") from None
    print(f"# merged {len(paths)} parts; native library versions: {versions}")
    print_rows(rows)
    summaries, ok = summarize(rows)
    if out:
        write_json(out, versions, folders, rows, summaries, skipped, shards=[str(p) for p in paths])
    return 0 if ok else 1


def run(args: argparse.Namespace) -> int:
    results = select_results(args.folders, args.only, args.shard)
    problems, notes = build_problems(
        results,
        args.candidate_seconds,
        args.min_us,
        args.max_seconds,
        args.find_first,
        args.rest_as_harness,
        args.deepbench_call,
    )
    for note in notes:
        print(f"# skipped: {note}")
    gemm_in, conv_in = loop_inputs(problems, args.find_first)
    problems = [p for p in problems if p.compared]
    if args.dry_run:
        seconds = (
            args.warm_up
            + sum(2 * float(line.split()[6]) for line in gemm_in)
            + sum(2 * float(line.split()[-1]) for line in conv_in)
        )
        print(f"# {len(problems)} parts; at least {seconds:.0f} s of native timing (candidates: per engine)")
        for what, lines in (("gemm_loop", gemm_in), ("conv_loop", conv_in)):
            print(f"# {what} stdin ({len(lines)} lines)")
            print("\n".join(lines))
        return 0
    if not problems:
        raise UsageError("no GEMM or convolution result with a native record to run (see the notes above)")
    if args.warm_up > 0:  # the harness measured on a GPU at its working temperature: so do the loops
        # gemm_loop runs a line's seconds twice (host loop, then graph)
        run_loop(args.bin / "gemm_loop", [WARM_UP_LINE.format(seconds=args.warm_up / 2)], "warm-up")
    env = {**os.environ, GRAPH_FIRST_ENV: "1"} if args.graph_first else None  # read by loop_timing.h
    gemm_out, gemm_err = run_loop(args.bin / "gemm_loop", gemm_in, "gemm_loop", env) if gemm_in else ([], "")
    conv_out, conv_err = run_loop(args.bin / "conv_loop", conv_in, "conv_loop", env) if conv_in else ([], "")
    gemm, conv = parse_gemm_output(gemm_out, gemm_in), parse_conv_output(conv_out)
    rows = [make_row(p, gemm, conv) for p in problems]
    versions = {"cublas": loop_version(gemm_err, "cublas"), "cudnn": loop_version(conv_err, "cudnn")}
    harness_versions = {
        "cublas": {r.library.get("cublas") for r in results if r.op == "gemm"} - {None},
        "cudnn": {r.library.get("cudnn_backend") for r in results if r.op == "conv"} - {None},
    }
    for lib, native in versions.items():
        if native and harness_versions[lib] and harness_versions[lib] != {native}:
            print(
                f"# WARNING: the harness's results name {lib} {sorted(harness_versions[lib])}, the native loop "
                f"loaded {native}"
            )
    print(f"# native libraries: {versions}")
    print_rows(rows)
    summaries, ok = summarize(rows)
    if args.json:
        write_json(args.json, versions, [str(f) for f in args.folders], rows, summaries, notes)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*", type=Path, help="deepbench-run results folders (results.jsonl)")
    ap.add_argument(
        "--bin", type=Path, default=DEFAULT_BIN, help=f"where build_native.sh put the loops (default {DEFAULT_BIN})"
    )
    ap.add_argument("--dry-run", action="store_true", help="print the loops' input lines and stop (no GPU needed)")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the per-kernel rows and the summary here")
    ap.add_argument("--only", metavar="GLOB", help="results whose id matches, e.g. 'conv/server/*/int8/*'")
    ap.add_argument(
        "--shard",
        type=parse_shard,
        default=(0, 1),
        metavar="I/N",
        help="every N-th result from the I-th (to fit a run into parts; --merge sums them up)",
    )
    ap.add_argument(
        "--candidate-seconds",
        type=float,
        default=CANDIDATE_SECONDS,
        metavar="S",
        help=f"each convolution candidate engine is timed this long each way (default {CANDIDATE_SECONDS}; "
        "0: leave out the engine comparison)",
    )
    ap.add_argument(
        "--warm-up",
        type=float,
        default=WARM_UP_S,
        metavar="S",
        help=f"seconds of a large fp16 GEMM before the first problem (default {WARM_UP_S:g}; 0: none)",
    )
    ap.add_argument("--merge", type=Path, nargs="+", metavar="JSON", help="summarize parts written with --json")
    ap.add_argument(
        "--deepbench-call",
        action="store_true",
        help="fp16 GEMMs: the loop makes DeepBench's gemm_bench call (cublasGemmEx, fp16 accumulate) instead of "
        "the harness's (fp32 accumulate); the operands are drawn as each result records (--inputs)",
    )
    ap.add_argument(
        "--min-us",
        type=float,
        default=0.0,
        metavar="US",
        help="leave out parts the harness timed under US (the targets count parts of 20 us and more)",
    )
    ap.add_argument(
        "--find-first",
        action="store_true",
        help="convolutions in the order DeepBench's conv_bench and the harness work in: per direction, "
        "every candidate first (cudnnFind's trial; the harness's engine race), then the chosen plan "
        "pinned, in one process; directions under --min-us run their candidates too (not compared)",
    )
    ap.add_argument(
        "--graph-first",
        action="store_true",
        help=f"the loops time the CUDA graph before the host loop ({GRAPH_FIRST_ENV}); on H100s at their "
        "power cap the order did not decide the fp16 GEMM comparison (results/fp16-gemm-clocks-h100)",
    )
    ap.add_argument(
        "--rest-as-harness",
        action="store_true",
        help="GEMMs: before each problem the loop idles as long as the harness spent on that kernel "
        f"outside its measurement (at most {MAX_REST_S:g} s), to test whether that pause, which "
        "lets a power-capped GPU's limiter raise the clock, explains a difference (on two H100s: "
        "fewer clock mismatches on one, no help on the other; results/fp16-gemm-clocks-h100)",
    )
    ap.add_argument(
        "--max-seconds",
        type=float,
        metavar="S",
        help="time each native problem at most S seconds (default: as long as the harness measured it)",
    )
    args = ap.parse_args(argv)
    try:
        if args.merge:
            return merge(args.merge, args.json)
        if not args.folders:
            raise UsageError("give one or more results folders (or --merge JSON ...)")
        if args.candidate_seconds < 0:
            raise UsageError("--candidate-seconds must not be negative")
        if args.find_first and args.candidate_seconds == 0:
            raise UsageError("--find-first runs the candidates: give --candidate-seconds above 0")
        return run(args)
    except UsageError as exc:
        print(f"native_side_by_side: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
