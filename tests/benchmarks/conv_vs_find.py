"""The harness's convolutions beside cuDNN's own algorithm search (issue 43's evidence; a script, not a unit
test: needs an NVIDIA GPU and the conv_find loop tests/benchmarks/build_native.sh builds).

native_side_by_side.py re-times the plan the harness chose and the candidates of the harness's own list, so
it shares that list's blind spot. This script asks the legacy API instead, as DeepBench's conv_bench.cu did:
for every `ok` convolution direction of one or more deepbench-run results folders, conv_find
(conv_find.cpp) runs cudnnFindConvolution{Forward,BackwardData,BackwardFilter}AlgorithmEx over every
algorithm cuDNN has, checks each one that ran against a sampled float64 reference (the tolerance the
harness's rule gives: kernels/precision.py, with its Winograd/FFT allowance in fp32), and times the
fastest correct one (a host loop and a CUDA graph, the better of the two counts), in the same sitting.

What each side ran, named in the output and in the JSON (`compared`), and flagged per row where it differs:
  problem     the padded sizes the result records (its `padding`), the direction, the precision;
  layout      the harness's is its record's info.layout; conv_find's is DeepBench's (--layout deepbench:
              NCHW fp32/tf32, NHWC fp16/bf16, int8 NCHW_VECT_C with INT8x32 from compute capability 7.5,
              NHWC where that cannot run: the row says `fallback`) or the harness's own (--layout harness);
              each row says both, and `layout_differs`;
  precision   fp32: the harness excludes TF32 engines; conv_find uses CUDNN_FMA_MATH and runs under
              NVIDIA_TF32_OVERRIDE=0 (set here unless a tf32 problem is fed), and every entry records
              the math type cuDNN ran; fp16/bf16: fp32 accumulate on both sides, CUDNN_TENSOR_OP_MATH;
              int8: int32 accumulate on both sides, the harness writes the int32 accumulator, conv_find
              int8 as conv_bench.cu's INT8 config (flagged: `output_differs`);
  inputs      random normal (filters scaled by 1/sqrt(C R S); int8 integers in [-64, 64)) on both sides,
              flagged where the result records other inputs.

Per direction: harness time and engine (info.cudnn), cudnnFind's fastest correct algorithm, its time,
harness / cudnnFind. The SUMMARY per precision, over directions the harness timed at --min-us (20 us) or
more: how many have harness <= 1.05x cudnnFind's fastest correct, how many are above 1.25x, and the worst;
issue 43's target: >= 95% within 1.05x and none above 1.25x.

    bash tests/benchmarks/build_native.sh                    # or LOOPS=find: conv_find alone, seconds
    python tests/benchmarks/conv_vs_find.py RUN [RUN ...] --json conv-vs-find.json
    python tests/benchmarks/conv_vs_find.py RUN --dry-run    # conv_find's input lines, no GPU needed
    python tests/benchmarks/conv_vs_find.py RUN --save-output find.txt   # then, without a GPU:
    python tests/benchmarks/conv_vs_find.py RUN --from-output find.txt --json conv-vs-find.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Literal

import native_side_by_side as sbs  # beside this file: results folders, running a loop, UsageError
from pydantic import BaseModel, ConfigDict

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.backends.cudnn.declaration import CudnnPartInfo
from deepbench.kernels.precision import TRANSFORM_TOLERANCE, Precision, tolerance
from deepbench.kernels.results import KernelResult, Status

HERE = Path(__file__).resolve().parent
DEFAULT_BIN = HERE.parent.parent / "build" / "native"
FIELDS = 17  # conv_find's input fields, echoed at the start of its output lines
MIN_US = 20.0  # issue 43's target counts directions the harness timed this long or longer
WITHIN = 1.05  # harness <= 1.05x cudnnFind's fastest correct
ABOVE = 1.25  # none above
WITHIN_SHARE = 0.95
WORST = 5  # the worst directions each SUMMARY names
# SM clocks this far apart (harness's median while sampled / conv_find's while timing) make a row's time
# ratio a comparison of unlike things: a sustained fp16 tensor-core loop draws the H200 down to 1.2-1.7 GHz
# (its power limit), conv_find's short bursts run at 1.98 GHz. Such rows are compared in cycles as well.
CLOCKS_DIFFER = 0.02
SECONDS = 0.1  # each timed algorithm, each way (conv_find's SECONDS): at most 3 a direction, 0.6 s
TF32_ENV = "NVIDIA_TF32_OVERRIDE"
LAYOUTS = {"NCHW": "nchw", "NHWC": "nhwc", "NCHW_VECT_C": "nchw_vect_c"}  # info.layout -> conv_find's LAYOUT
# What conv_find writes per precision where the harness writes another type (kernels/precision.py: int8 -> int32).
FIND_OUTPUT = {"int8": "int8"}


class Frozen(BaseModel):
    """This script's records: immutable, nothing unknown."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class FindEntry(Frozen):
    """One entry cudnnFind returned (conv_find's `find` line)."""

    algo: str
    status: str
    find_us: float
    memory: int
    math: str
    determinism: str
    check: Literal["passed", "failed", "-"]
    error: float | None


class Fastest(Frozen):
    """conv_find's `fastest` line: the fastest correct algorithm, timed both ways."""

    algo: str
    math: str
    us: float
    graph_us: float
    layout: str
    workspace: int
    returned: int
    succeeded: int
    correct: int
    mhz: float | None = None  # SM clock read beside the host loop's and the graph's timing (`timed` line)
    graph_mhz: float | None = None

    @property
    def graph_is_best(self) -> bool:
        return not math.isnan(self.graph_us) and self.graph_us < self.us

    @property
    def best_us(self) -> float:
        """The better of the two times (NaN graph: the host loop's)."""
        return self.graph_us if self.graph_is_best else self.us

    @property
    def best_mhz(self) -> float | None:
        """The SM clock read while the better of the two was timed (None where unread)."""
        return self.graph_mhz if self.graph_is_best else self.mhz


class Found(Frozen):
    """Everything conv_find printed for one input line."""

    entries: tuple[FindEntry, ...] = ()
    fastest: Fastest | None = None
    error: str = ""
    fallback: str = ""  # int8: why DeepBench's NCHW_VECT_C could not run (then NHWC ran)


class Direction(Frozen):
    """One direction of one result as the harness recorded it, and conv_find's input line for it."""

    id: str
    precision: str
    direction: str
    harness_us: float
    harness_engine: str
    harness_plan: str
    harness_layout: str
    harness_mhz: float | None = None  # median SM clock beside the harness's samples (None where unread)
    line: str


class Problem(Direction):
    """A direction to run, with what the row compares beside it."""

    harness_output: str
    inputs: str


class Row(Direction):
    """One direction side by side."""

    find_layout: str = ""
    layout_differs: bool = False
    output_differs: str = ""
    inputs_differ: str = ""
    find_algo: str = ""
    find_math: str = ""
    find_us: float | None = None
    find_stream_us: float | None = None
    find_graph_us: float | None = None
    cudnn_find_us: float | None = None  # the winner's time as cudnnFind itself measured it (a few calls)
    ratio: float | None = None
    find_mhz: float | None = None
    cycle_ratio: float | None = None  # ratio x harness clock / conv_find clock: the ratio in SM cycles
    returned: int = 0
    succeeded: int = 0
    correct: int = 0
    entries: tuple[FindEntry, ...] = ()
    error: str = ""
    fallback: str = ""


class Summary(Frozen):
    """One precision's SUMMARY over the directions of MIN_US or more."""

    precision: str
    directions: int
    compared: int
    without_find: int
    within: int
    above: int
    layout_differs: int
    passed: bool
    worst: tuple[str, ...]
    clocks_differ: int = 0  # rows whose SM clocks were more than CLOCKS_DIFFER apart
    within_cycles: int = 0  # the counts again with those rows compared in cycles
    above_cycles: int = 0
    passed_cycles: bool = False


# ----- from results to conv_find's input ------------------------------------------------------------


def reduction(direction: str, sizes: dict[str, int], out_h: int, out_w: int, r: int, s: int) -> int:
    """The length of the dot product each output element sums: C R S, K R S or N P Q."""
    if direction == "fwd":
        return sizes["c"] * r * s
    if direction == "bwd_data":
        return sizes["k"] * r * s
    return sizes["n"] * out_h * out_w


def problems_of(r: KernelResult, layout: str, seconds: float, min_us: float) -> tuple[list[Problem], list[str]]:
    """conv_find's lines for the directions of a convolution result timed at `min_us` or more, and notes
    on the directions skipped."""
    kk = r.kernel
    sizes = {d: r.padding.get(d, getattr(kk, d)) for d in ("n", "c", "h", "w", "k")}
    out_h = (sizes["h"] + 2 * kk.pad_h - kk.r) // kk.stride_h + 1
    out_w = (sizes["w"] + 2 * kk.pad_w - kk.s) // kk.stride_w + 1
    shape = (
        f"{sizes['n']} {sizes['c']} {sizes['h']} {sizes['w']} {sizes['k']} {kk.r} {kk.s} "
        f"{kk.pad_h} {kk.pad_w} {kk.stride_h} {kk.stride_w}"
    )
    precision = Precision(r.precision.name.value)
    problems, notes = [], []
    for part in r.parts:
        if part.measurement.stats.median < min_us:
            continue
        info = info_of(CudnnPartInfo, part.info)
        if info is None:
            notes.append(f"{r.id} {part.direction}: no cuDNN record in its info (not the cuDNN backend)")
            continue
        find_layout = layout
        if layout == "harness":
            find_layout = LAYOUTS.get(info.layout.upper(), "")
            if not find_layout:
                notes.append(f"{r.id} {part.direction}: its layout '{info.layout}' is not one conv_find runs")
                continue
        tol = tolerance(precision, reduction(part.direction, sizes, out_h, out_w, kk.r, kk.s))
        transform = TRANSFORM_TOLERANCE.get(precision, tol)
        line = f"{precision.value} {part.direction} {shape} {find_layout} {tol:.3e} {transform:.3e} {seconds:.3f}"
        problems.append(
            Problem(
                id=r.id,
                precision=precision.value,
                direction=part.direction,
                harness_us=part.measurement.stats.median,
                harness_engine=info.cudnn.engine,
                harness_plan=info.cudnn.plan_name,
                harness_layout=info.layout,
                harness_mhz=statistics.median(part.measurement.clocks_mhz) if part.measurement.clocks_mhz else None,
                harness_output=r.precision.output,
                inputs=r.inputs or "normal",
                line=line,
            )
        )
    return problems, notes


def build_problems(
    results: list[KernelResult], layout: str, seconds: float, min_us: float
) -> tuple[list[Problem], list[str]]:
    """The problems of every ok convolution, and notes on what was skipped."""
    problems: list[Problem] = []
    notes: list[str] = []
    for r in results:
        if r.op != "conv":
            continue
        if r.status is not Status.OK:
            notes.append(f"{r.id}: {r.status.value}, skipped")
            continue
        ps, ns = problems_of(r, layout, seconds, min_us)
        problems += ps
        notes += ns
    return problems, notes


# ----- conv_find's output -----------------------------------------------------------------------------


def _float(text: str) -> float:
    return float(text)  # "nan" reads as NaN


def parse_output(lines: list[str]) -> dict[str, Found]:
    """conv_find's lines by their echoed input line (`#` lines, its stderr header, skipped). A line that
    is not in the documented format raises ValueError naming it."""
    entries: dict[str, list[FindEntry]] = defaultdict(list)
    fastest: dict[str, Fastest] = {}
    errors: dict[str, str] = {}
    fallbacks: dict[str, str] = {}
    clocks: dict[tuple[str, str, str], tuple[float, float]] = {}  # (line, algo, math) -> (MHZ, GRAPH_MHZ)
    for number, line in enumerate(lines, 1):
        f = line.split()
        if not f or f[0] == "#":
            continue
        key, kind, rest = " ".join(f[:FIELDS]), f[FIELDS] if len(f) > FIELDS else "", f[FIELDS + 1 :]
        try:
            if kind == "find" and len(rest) == 9:  # RANK ALGO STATUS FIND_US MEMORY MATH DETERMINISM CHECK ERROR
                entries[key].append(
                    FindEntry.model_validate(
                        {
                            "algo": rest[1],
                            "status": rest[2],
                            "find_us": _float(rest[3]),
                            "memory": int(rest[4]),
                            "math": rest[5],
                            "determinism": rest[6],
                            "check": rest[7],
                            "error": None if rest[8] == "-" else _float(rest[8]),
                        }
                    )
                )
            elif kind == "timed" and len(rest) == 7:  # ALGO MATH US GRAPH_US CALLS MHZ GRAPH_MHZ
                clocks[(key, rest[0], rest[1])] = (_float(rest[5]), _float(rest[6]))
            elif kind == "fastest" and len(rest) == 9:
                mhz, graph_mhz = clocks.get((key, rest[0], rest[1]), (math.nan, math.nan))
                fastest[key] = Fastest(
                    mhz=None if math.isnan(mhz) or mhz <= 0 else mhz,
                    graph_mhz=None if math.isnan(graph_mhz) or graph_mhz <= 0 else graph_mhz,
                    algo=rest[0],
                    math=rest[1],
                    us=_float(rest[2]),
                    graph_us=_float(rest[3]),
                    layout=rest[4],
                    workspace=int(rest[5]),
                    returned=int(rest[6]),
                    succeeded=int(rest[7]),
                    correct=int(rest[8]),
                )
            elif kind == "error":
                errors[key] = " ".join(rest)
            elif kind == "fallback" and rest:  # the lines before it are void: the problem runs again in NHWC
                fallbacks[key] = " ".join(rest)
                entries.pop(key, None)
            else:
                raise ValueError("unknown kind")
        except ValueError:
            raise ValueError(f"line {number} is not conv_find's output: {line[:200]}") from None
    keys = set(entries) | set(fastest) | set(errors) | set(fallbacks)
    return {
        k: Found(
            entries=tuple(entries.get(k, ())),
            fastest=fastest.get(k),
            error=errors.get(k, ""),
            fallback=fallbacks.get(k, ""),
        )
        for k in keys
    }


def header(lines: list[str], name: str) -> str:
    """The value of conv_find's stderr header line `# NAME VALUE...` ('' where absent)."""
    for line in lines:
        if line.startswith(f"# {name} "):
            return line[len(name) + 3 :].strip()
    return ""


# ----- rows and summary -------------------------------------------------------------------------------


def make_row(p: Problem, found: Found | None) -> Row:
    row = Row.model_validate(
        {
            **p.model_dump(include=set(Direction.model_fields)),
            "inputs_differ": "" if p.inputs == "normal" else f"harness {p.inputs}, conv_find normal",
        }
    )
    if found is None:
        return row.model_copy(update={"error": "no output from conv_find"})
    row = row.model_copy(update={"entries": found.entries, "error": found.error, "fallback": found.fallback})
    fast = found.fastest
    if fast is None:
        return row
    output = FIND_OUTPUT.get(p.precision)
    return row.model_copy(
        update={
            "find_layout": fast.layout,
            "layout_differs": fast.layout.upper() != p.harness_layout.upper(),
            "output_differs": f"harness {p.harness_output}, conv_find {output}"
            if output and output != p.harness_output
            else "",
            "find_algo": fast.algo,
            "find_math": fast.math,
            "find_us": fast.best_us,
            "find_stream_us": fast.us,
            "find_graph_us": None if math.isnan(fast.graph_us) else fast.graph_us,
            "cudnn_find_us": next(
                (e.find_us for e in found.entries if (e.algo, e.math) == (fast.algo, fast.math)), None
            ),
            "ratio": p.harness_us / fast.best_us,
            "find_mhz": fast.best_mhz,
            "cycle_ratio": p.harness_us * p.harness_mhz / (fast.best_us * fast.best_mhz)
            if p.harness_mhz and fast.best_mhz
            else None,
            "returned": fast.returned,
            "succeeded": fast.succeeded,
            "correct": fast.correct,
        }
    )


def clocks_differ(r: Row) -> bool:
    """Whether the two sides ran at SM clocks more than CLOCKS_DIFFER apart."""
    return r.cycle_ratio is not None and r.ratio is not None and abs(r.cycle_ratio / r.ratio - 1) > CLOCKS_DIFFER


def like_ratio(r: Row) -> float | None:
    """The row's ratio in cycles where the clocks differ, else in time."""
    return r.cycle_ratio if clocks_differ(r) else r.ratio


def summarize(rows: list[Row], min_us: float = MIN_US) -> list[Summary]:
    """One SUMMARY per precision over the rows the harness timed at `min_us` or more."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.harness_us >= min_us:
            groups[row.precision].append(row)
    out = []
    for precision, group in sorted(groups.items()):
        compared = [r for r in group if r.ratio is not None]
        ratios = [r.ratio for r in compared if r.ratio is not None]
        within = sum(x <= WITHIN for x in ratios)
        above = sum(x > ABOVE for x in ratios)
        cycles = [x for x in map(like_ratio, compared) if x is not None]
        within_cycles = sum(x <= WITHIN for x in cycles)
        above_cycles = sum(x > ABOVE for x in cycles)
        worst = sorted(compared, key=lambda r: -(r.ratio or 0.0))[:WORST]
        out.append(
            Summary(
                precision=precision,
                directions=len(group),
                compared=len(compared),
                without_find=len(group) - len(compared),
                within=within,
                above=above,
                layout_differs=sum(r.layout_differs for r in compared),
                passed=bool(ratios)
                and within >= WITHIN_SHARE * len(group)
                and above == 0
                and len(compared) == len(group),
                clocks_differ=sum(map(clocks_differ, compared)),
                within_cycles=within_cycles,
                above_cycles=above_cycles,
                passed_cycles=bool(cycles)
                and within_cycles >= WITHIN_SHARE * len(group)
                and above_cycles == 0
                and len(compared) == len(group),
                worst=tuple(
                    f"{r.id} {r.direction} {r.harness_us:.1f} vs {r.find_us:.1f} us ({r.ratio:.2f}x, {r.find_algo})"
                    for r in worst
                ),
            )
        )
    return out


def fmt(x: float | None, spec: str = "9.2f") -> str:
    """`x` formatted, or `-` as wide where there is none."""
    return "-".rjust(int(spec.split(".")[0])) if x is None or math.isnan(x) else format(x, spec)


def print_rows(rows: list[Row]) -> None:
    print(
        f"{'id':34} {'dir':10} {'harness_us':>10} {'find_us':>10} {'h/find':>7} {'MHz h/find':>10} {'cycles':>7}  "
        "harness layout/engine | conv_find layout, fastest correct algorithm (math) [correct/ran/returned]"
    )
    for r in rows:
        tail = r.error or f"{r.find_layout}, {r.find_algo} ({r.find_math}) [{r.correct}/{r.succeeded}/{r.returned}]"
        fallback = f"fallback from {r.fallback}" if r.fallback else ""
        flags = [
            f for f in ("layout differs" if r.layout_differs else "", r.output_differs, r.inputs_differ, fallback) if f
        ]
        print(
            f"{r.id:34} {r.direction:10} {fmt(r.harness_us, '10.2f')} {fmt(r.find_us, '10.2f')} "
            f"{fmt(r.ratio, '7.3f')} {clocks(r):>10} {fmt(r.cycle_ratio, '7.3f')}  "
            f"{r.harness_layout}/{r.harness_plan or r.harness_engine} | {tail}"
            + (f"  [{'; '.join(flags)}]" if flags else "")
        )


def clocks(r: Row) -> str:
    """'HARNESS/FIND' SM clocks in MHz, '*' marking a row compared in cycles."""
    if not (r.harness_mhz and r.find_mhz):
        return "-"
    return f"{r.harness_mhz:.0f}/{r.find_mhz:.0f}" + ("*" if clocks_differ(r) else "")


def print_summary(summaries: list[Summary], min_us: float) -> None:
    print()
    for s in summaries:
        share = 100 * s.within / s.directions if s.directions else 0.0
        print(
            f"SUMMARY conv {s.precision}: {s.directions} directions >= {min_us:g} us ({s.without_find} without a "
            f"cudnnFind figure); harness <= {WITHIN}x cudnnFind's fastest correct: {s.within} ({share:.1f}%); "
            f"above {ABOVE}x: {s.above}; conv_find in another layout: {s.layout_differs}  "
            f"{'PASS' if s.passed else 'FAIL'}"
        )
        if s.clocks_differ:
            print(
                f"  like with like: {s.clocks_differ} directions ran at SM clocks more than {CLOCKS_DIFFER:.0%} apart "
                f"(marked *): compared in cycles, harness <= {WITHIN}x: {s.within_cycles} "
                f"({100 * s.within_cycles / s.directions:.1f}%); above {ABOVE}x: {s.above_cycles}  "
                f"{'PASS' if s.passed_cycles else 'FAIL'}"
            )
        for w in s.worst:
            print(f"  worst: {w}")


def compared_sides(layout: str, env_tf32: str, stderr_lines: list[str]) -> dict[str, str]:
    """What the two sides ran, as the JSON's `compared` records it."""
    return {
        "harness": "each result's recorded problem (padded sizes), layout (info.layout) and engine (info.cudnn); "
        "fp32 without TF32 engines",
        "conv_find": "cudnnFind*AlgorithmEx over every algorithm (requestedAlgoCount = MaxCount), checked, the "
        f"fastest correct timed; layout {layout} (deepbench: NCHW fp32/tf32, NHWC fp16/bf16, int8 NCHW_VECT_C "
        "INT8x32 from cc 7.5); fp32 CUDNN_FMA_MATH; fp16/bf16 CUDNN_TENSOR_OP_MATH, fp32 accumulate; int8 int32 "
        "accumulate, int8 output",
        "tf32_override": env_tf32 or header(stderr_lines, TF32_ENV) or "unset",
        "cudnn": header(stderr_lines, "cudnn"),
        "device": header(stderr_lines, "device"),
        "inputs": "random normal, filters scaled by 1/sqrt(C R S); int8 integers in [-64, 64)",
    }


# ----- main ------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    results = sbs.select_results(args.folders, args.only, args.shard)
    problems, notes = build_problems(results, args.layout, args.seconds, args.min_us)
    for note in notes:
        print(f"# skipped: {note}")
    lines = list(dict.fromkeys(p.line for p in problems))
    if args.dry_run:
        print(f"# {len(problems)} directions, {len(lines)} conv_find lines")
        print("\n".join(lines))
        return 0
    if not problems:
        raise sbs.UsageError("no convolution direction with a cuDNN record to run (see the notes above)")
    env_tf32 = ""
    if args.from_output:
        outputs = []
        for path in args.from_output:
            try:
                outputs.append(path.read_text().splitlines())
            except OSError as exc:
                raise sbs.UsageError(f"cannot read {path}: {exc.strerror}") from None
        stderr_lines = [line for output in outputs for line in output if line.startswith("# ")]
    else:
        env = dict(os.environ)
        if not any(p.precision == "tf32" for p in problems):
            env[TF32_ENV] = env_tf32 = "0"  # true fp32: no TF32 anywhere in the loop's process
        with contextlib.ExitStack() as stack:  # the saved output grows line by line: a run cut short keeps it
            sink = stack.enter_context(args.save_output.open("w")) if args.save_output else None
            output, stderr = sbs.run_loop(args.bin / "conv_find", lines, "conv_find", env, sink)
            stderr_lines = [line for line in stderr.splitlines() if line.startswith("# ")]
            if sink:
                sink.write("".join(f"{line}\n" for line in stderr_lines))
        outputs = [output]
    found: dict[str, Found] = {}
    try:
        for output in reversed(outputs):  # a line two outputs hold: the first one's
            found.update(parse_output(output))
    except ValueError as exc:
        raise sbs.UsageError(str(exc)) from None
    rows = [make_row(p, found.get(p.line)) for p in problems]
    sides = compared_sides(args.layout, env_tf32, stderr_lines)
    harness_cudnn = sorted({r.library.get("cudnn_backend", "") for r in results if r.op == "conv"} - {""})
    print(f"# compared: {sides}")
    if harness_cudnn and sides["cudnn"] and harness_cudnn != [sides["cudnn"]]:
        print(f"# WARNING: the harness's results name cuDNN {harness_cudnn}, conv_find loaded {sides['cudnn']}")
    print_rows(rows)
    summaries = summarize(rows, args.min_us)
    print_summary(summaries, args.min_us)
    if args.json:
        doc = {
            "compared": sides,
            "harness_cudnn": harness_cudnn,
            "folders": [str(f) for f in args.folders],
            "min_us": args.min_us,
            "summary": [s.model_dump() for s in summaries],
            "skipped": notes,
            "rows": [r.model_dump() for r in rows],
        }
        args.json.write_text(json.dumps(doc, indent=1))
    return 0 if summaries and all(s.passed for s in summaries) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path, help="deepbench-run results folders (results.jsonl[.gz])")
    ap.add_argument(
        "--bin", type=Path, default=DEFAULT_BIN, help=f"where build_native.sh put conv_find ({DEFAULT_BIN})"
    )
    ap.add_argument(
        "--layout",
        choices=("deepbench", "harness"),
        default="deepbench",
        help="conv_find's layout: DeepBench's (default) or the one each result records (like with like)",
    )
    ap.add_argument("--seconds", type=float, default=SECONDS, help=f"each timed algorithm, each way ({SECONDS})")
    ap.add_argument(
        "--min-us",
        type=float,
        default=MIN_US,
        metavar="US",
        help=f"only directions the harness timed at US or more (default {MIN_US:g}: the target's cut)",
    )
    ap.add_argument("--only", metavar="GLOB", help="results whose id matches, e.g. 'conv/train/02*'")
    ap.add_argument(
        "--shard", type=sbs.parse_shard, default=(0, 1), metavar="I/N", help="every N-th result from the I-th"
    )
    ap.add_argument("--dry-run", action="store_true", help="print conv_find's input lines and stop (no GPU needed)")
    ap.add_argument("--save-output", type=Path, metavar="FILE", help="keep conv_find's output (header and lines)")
    ap.add_argument(
        "--from-output",
        type=Path,
        action="append",
        metavar="FILE",
        help="read conv_find's output saved earlier instead of running it (repeatable: the outputs of several "
        "sittings, each beside the harness figures of its own sitting; a line two files hold is the first one's)",
    )
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the rows, the summary and what was compared")
    args = ap.parse_args(argv)
    try:
        if args.seconds <= 0:
            raise sbs.UsageError("--seconds must be above 0")
        return run(args)
    except sbs.UsageError as exc:
        print(f"conv_vs_find: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
