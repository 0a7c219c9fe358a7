"""Does the harness time MKL as DeepBench's own Intel GEMM benchmark would? (issue 55; a script, not a unit
test: it needs gcc and the mkl-devel headers, and a quiet CPU for its figures to mean anything.)

It builds tests/benchmarks/mkl_gemm_loop.c against the libmkl_rt the mkl backend loads, then, on the same CPU,
in turns for --rounds rounds (harness first in even rounds, the loop first in odd ones, so that a slow drift
of the machine falls on both sides), runs
  harness  deepbench-run --local --backend mkl on the selected GEMMs (default: the inference-server set,
           fp32 and int8), with the same --threads as the loop;
  loop     mkl_gemm_loop on the very problems the harness's results record (blas_call: transposes, m, n, k),
           which computes DeepBench's leading dimensions itself: a recorded lda/ldb/ldc that differs from
           the loop's is reported. DeepBench's way: one warm-up, then 10 calls timed together with dsecnd(),
           on DeepBench's data (drand48 floats; int8 A = 11, B = 22), with the harness's beta = 0
           (--deepbench-beta: bench.cpp's beta = 1).
Per kernel: the loop's time (median over rounds), the harness's median (median over rounds) and the ratio
harness / loop (the median over rounds of each round's ratio: a round's two sides ran back to back). Then a
SUMMARY per precision over the GEMMs of --min-us (1 ms) or more: how many ratios lie within [0.95, 1.05];
issue 55's goal: 95% or more. Then `deepbench compare` of the last round's mkl run beside a
`--backend torch` run of the same kernels (--no-torch skips it).

    python tests/benchmarks/mkl_side_by_side.py [--suite inference-server] [--where m=5124] [--limit 10]
        [--precision fp32,int8] [--rounds 3] [--threads N] [--mkl-gemm packed] [--keep DIR] [--no-torch]

The CPU's load is printed beside the figures, since on a shared machine the two sides' times wander apart
for reasons of neither: per kernel the cores other processes kept busy while each side timed it (the largest
over rounds; both reckon it as kernels/noise.py's CpuWindow does), and a second SUMMARY holds only the
kernels neither side of any round measured contended by the harness's rule (others kept busy more cores than
the threads left free, by more than 0.25: kernels/noise.py `contended`). On 2 CPUs, --threads 1 leaves a core
to a neighbour."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from deepbench.kernels.backends.cpu.runtime import physical_cores
from deepbench.kernels.backends.cpu.wheel_libraries import wheel_library_folder
from deepbench.kernels.backends.mkl.binding import LIBRARY
from deepbench.kernels.noise import OTHERS_CORES_WARN, contended, usable_cpus
from deepbench.kernels.results import KernelResult, Status
from deepbench.kernels.results_file import read_results

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "mkl_gemm_loop.c"
DEFAULT_BUILD = HERE.parent.parent / "build" / "mkl"
HEADER = "mkl.h"
MIN_US = 1000.0  # the goal holds for GEMMs of 1 ms or more
WITHIN = (0.95, 1.05)
GOAL_SHARE = 0.95
PRECISIONS = ("fp32", "int8")  # the loop's
LOOP_FIELDS = 11  # PREC TA TB M N K LDA LDB LDC MEDIAN OTHERS, then each trial's time
# A pair measured uncontended: while either side timed it, other processes kept busy no more cores than the run's
# threads left free, by the harness's own rule (kernels/noise.py `contended`); both sides reckon the others'
# cores alike (/proc/stat's busy time less their own CPU time, noise.py CpuWindow).
RUN_TIMEOUT_S = 6 * 3600


class UsageError(Exception):
    """Bad input or a missing tool: one line, exit status 2."""


@dataclass
class Kernel:
    """One harness GEMM and what each round measured of it."""

    id: str
    precision: str
    problem: tuple[str, ...]  # the loop's fields: PREC TA TB M N K
    lds: tuple[int, int, int]
    harness_us: list[float] = field(default_factory=list)
    loop_us: list[float] = field(default_factory=list)
    others_cores: list[float] = field(default_factory=list)
    loop_others: list[float] = field(default_factory=list)

    def uncontended(self, spare: int) -> bool:
        """Neither side of any round was contended (noise.contended) with `spare` CPUs beside the threads."""
        sides = (self.others_cores, self.loop_others)
        return all(len(s) == len(self.harness_us) and not any(contended(x, spare) for x in s) for s in sides)

    @property
    def ratio(self) -> float:
        return statistics.median(h / lo for h, lo in zip(self.harness_us, self.loop_us, strict=False))


def mkl_dirs() -> tuple[Path, Path]:
    """(include, lib) of the mkl-devel and mkl wheels: the folder the backend loads libmkl_rt from
    (cpu/wheel_libraries.py) and the include folder beside it."""
    lib = wheel_library_folder(LIBRARY)
    return lib.parent / "include", lib


def missing_tools() -> str:
    """What the build lacks ('' : nothing)."""
    include, lib = mkl_dirs()
    if shutil.which(os.environ.get("CC", "gcc")) is None:
        return "no C compiler (gcc, or $CC)"
    if not (include / HEADER).is_file():
        return f"no {HEADER} in {include} (pip install mkl-devel)"
    if not (lib / LIBRARY).is_file():
        return f"no {LIBRARY} in {lib} (pip install mkl)"
    return ""


def build(out_dir: Path) -> Path:
    """mkl_gemm_loop, linked with an rpath to the wheel's libmkl_rt (the library the backend loads)."""
    why = missing_tools()
    if why:
        raise UsageError(f"cannot build the loop: {why}")
    include, lib = mkl_dirs()
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / "mkl_gemm_loop"
    cc = os.environ.get("CC", "gcc")
    cmd = [cc, "-O2", "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", f"-I{include}", str(SOURCE), "-o", str(binary)]
    cmd += [f"-L{lib}", f"-l:{LIBRARY}", f"-Wl,-rpath,{lib}", "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UsageError(f"building the loop failed: {proc.stderr.strip()[-800:]}")
    return binary


def harness_command(args: argparse.Namespace, out: Path, backend: str) -> list[str]:
    cmd = ["deepbench-run", "--local", "--backend", backend, "--suite", args.suite, "--ops", "gemm"]
    cmd += ["--precision", args.precision, "--threads", str(args.threads), "--inputs", args.inputs]
    cmd += ["--quiet", "--out", str(out)]
    for cond in args.where:
        cmd += ["--where", cond]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if args.fast:
        cmd.append("--fast")
    if backend == "mkl" and args.mkl_gemm != "direct":
        cmd += ["--mkl-gemm", args.mkl_gemm]
    return cmd


def run_harness(args: argparse.Namespace, out: Path, backend: str = "mkl") -> list[KernelResult]:
    cmd = harness_command(args, out, backend)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if proc.returncode not in (0, 1):
        raise UsageError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    return read_results(out / "results.jsonl")


def kernels_of(results: list[KernelResult]) -> dict[str, Kernel]:
    """The ok GEMMs the loop can run, by result id, with the call their results record."""
    out = {}
    for r in results:
        if r.status is not Status.OK or r.precision.name.value not in PRECISIONS or not r.parts:
            continue
        call = r.parts[0].info.get("blas_call") or {}
        if not call:
            continue
        prec = r.precision.name.value
        problem = (prec, call["transa"], call["transb"], *(str(call[d]) for d in ("m", "n", "k")))
        out[r.id] = Kernel(r.id, prec, problem, (call["lda"], call["ldb"], call["ldc"]))
    return out


def run_loop(
    binary: Path, args: argparse.Namespace, problems: list[tuple[str, ...]], out: Path
) -> dict[tuple, list[str]]:
    """The loop's output fields by problem (its output kept in `out`)."""
    cmd = [str(binary), "--threads", str(args.threads), "--trials", str(args.trials)]
    cmd += ["--beta", "1" if args.deepbench_beta else "0"] + (["--packed"] if args.mkl_gemm == "packed" else [])
    stdin = "".join(" ".join(p) + "\n" for p in problems)
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise UsageError(f"the loop failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    out.write_text(proc.stdout)
    found = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if line.startswith("error"):
            print(f"loop: {line}", file=sys.stderr)
        elif not line.startswith("#") and len(fields) >= LOOP_FIELDS:
            found[tuple(fields[:6])] = fields
    return found


def record_round(kernels: dict[str, Kernel], harness: list[KernelResult], loop: dict[tuple, list[str]]) -> None:
    by_id = {r.id: r for r in harness if r.status is Status.OK and r.time_us is not None}
    for k in kernels.values():
        r, fields = by_id.get(k.id), loop.get(k.problem)
        if r is None or fields is None or r.time_us is None:
            continue
        k.harness_us.append(r.time_us.median)
        k.loop_us.append(float(fields[9]))
        k.loop_others.append(float(fields[10]))
        others = r.parts[0].measurement.others_cores
        if others is not None:
            k.others_cores.append(others)


def ld_mismatches(kernels: dict[str, Kernel], loop: dict[tuple, list[str]]) -> list[str]:
    """Kernels whose recorded leading dimensions are not those the loop computed DeepBench's way."""
    out = []
    for k in kernels.values():
        fields = loop.get(k.problem)
        if fields is not None and tuple(int(x) for x in fields[6:9]) != k.lds:
            out.append(f"{k.id}: harness lda/ldb/ldc {k.lds}, loop {tuple(fields[6:9])}")
    return out


def rounds(args: argparse.Namespace, binary: Path, root: Path) -> tuple[dict[str, Kernel], Path]:
    """Every round's two sides, in turns; the kernels and the last round's harness folder."""
    kernels: dict[str, Kernel] = {}
    last = root
    for r in range(args.rounds):
        loop: dict[tuple, list[str]] = {}
        harness: list[KernelResult] = []
        for side in ("harness", "loop") if r % 2 == 0 else ("loop", "harness"):
            if side == "harness":
                last = root / f"mkl-{r}"
                harness = run_harness(args, last)
                if not kernels:
                    kernels = kernels_of(harness)
                    if not kernels:
                        raise UsageError(f"no ok fp32 or int8 GEMM in {last}: nothing to hold against the loop")
            else:
                problems = sorted({k.problem for k in kernels.values()})
                loop = run_loop(binary, args, problems, root / f"loop-{r}.txt")
        if r == 0:
            for line in ld_mismatches(kernels, loop):
                print(f"LEADING DIMENSIONS DIFFER {line}")
        record_round(kernels, harness, loop)
        print(
            f"round {r + 1}/{args.rounds}: {sum(1 for k in kernels.values() if len(k.loop_us) > r)} kernels", flush=True
        )
    return kernels, last


def report(kernels: dict[str, Kernel], args: argparse.Namespace) -> None:
    measured = [k for k in kernels.values() if k.loop_us and k.harness_us]
    head = f"{'kernel':34} {'problem':28} {'lda/ldb/ldc':18} {'loop us':>12} {'harness us':>12} {'ratio':>7}"
    print(f"\n{head} {'others: loop':>12} {'harness':>7}")
    for k in sorted(measured, key=lambda k: (k.precision, k.id)):
        problem = " ".join(k.problem[1:])
        lds = "/".join(str(x) for x in k.lds)
        loop, harness = statistics.median(k.loop_us), statistics.median(k.harness_us)
        loop_others = max(k.loop_others)
        others = max(k.others_cores) if k.others_cores else math.nan
        mark = "" if WITHIN[0] <= k.ratio <= WITHIN[1] else "  *"
        row = f"{k.id:34} {problem:28} {lds:18} {loop:12.1f} {harness:12.1f} {k.ratio:7.3f}"
        print(f"{row} {loop_others:12.2f} {others:7.2f}{mark}")
    long = [k for k in measured if statistics.median(k.loop_us) >= args.min_us]
    summary("", long, args.min_us)
    spare = max(0, len(usable_cpus()) - args.threads)
    summary(
        f" (uncontended: others kept <= {spare + OTHERS_CORES_WARN:g} cores busy beside both sides, every round)",
        [k for k in long if k.uncontended(spare)],
        args.min_us,
    )
    others = [x for k in measured for x in k.others_cores]
    busy = f"{statistics.mean(others):.2f}" if others else "unknown"
    print(
        f"cpu: {os.cpu_count()} CPUs, --threads {args.threads}, {args.rounds} rounds; load average now "
        f"{os.getloadavg()[0]:.2f}; other processes kept {busy} cores busy on average while the harness measured"
    )


def summary(label: str, kernels: list[Kernel], min_us: float) -> None:
    """SUMMARY lines per precision and for all: how many ratios lie within WITHIN, against the goal."""
    groups: dict[str, list[Kernel]] = defaultdict(list)
    for k in kernels:
        groups[k.precision].append(k)
        groups["all"].append(k)
    for name in [*PRECISIONS, "all"]:
        group = groups.get(name, [])
        if not group:
            print(f"SUMMARY {name}{label}: no GEMM of {min_us:g} us or more")
            continue
        ratios = [k.ratio for k in group]
        within = sum(WITHIN[0] <= x <= WITHIN[1] for x in ratios)
        met = within >= GOAL_SHARE * len(group)
        print(
            f"SUMMARY {name}{label}: {within} of {len(group)} GEMMs of {min_us:g} us or more within "
            f"[{WITHIN[0]}, {WITHIN[1]}] ({100 * within / len(group):.0f}%; goal {100 * GOAL_SHARE:.0f}%: "
            f"{'met' if met else 'NOT met'}); harness / loop min {min(ratios):.3f}, median "
            f"{statistics.median(ratios):.3f}, max {max(ratios):.3f}"
        )


def compare_with_torch(args: argparse.Namespace, mkl_run: Path, root: Path) -> None:
    torch_run = root / "torch"
    run_harness(args, torch_run, backend="torch")
    # Two backends on the same problems is this comparison's point: allowed, and named in its heading.
    cmd = ["deepbench", "compare", f"mkl={mkl_run}", f"torch={torch_run}", "--allow-unlike"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    print(f"\n$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="inference-server", help="the harness's suite (default inference-server)")
    p.add_argument("--where", action="append", default=[], help="the harness's --where (repeatable)")
    p.add_argument("--limit", type=int, help="at most N GEMMs (the harness's --limit)")
    p.add_argument("--precision", default="fp32,int8", help="fp32, int8 or both (default both)")
    p.add_argument("--rounds", type=int, default=3, help="harness/loop rounds, in turns (default 3)")
    p.add_argument("--threads", type=int, default=physical_cores(), help="both sides' threads (default: cores)")
    p.add_argument("--trials", type=int, default=1, help="the loop's measurements per round (DeepBench: 1)")
    p.add_argument("--mkl-gemm", choices=("direct", "packed"), default="direct", help="both sides' GEMM call")
    p.add_argument("--inputs", default="deepbench", help="the harness's --inputs (default deepbench)")
    p.add_argument("--deepbench-beta", action="store_true", help="the loop with bench.cpp's beta = 1")
    p.add_argument("--fast", action="store_true", help="the harness's --fast")
    p.add_argument("--min-us", type=float, default=MIN_US, help="the summary's shortest GEMM (default 1000)")
    p.add_argument("--build-dir", type=Path, default=DEFAULT_BUILD, help="where the loop is built")
    p.add_argument("--keep", type=Path, help="keep the results folders here")
    p.add_argument("--no-torch", action="store_true", help="skip the torch run and deepbench compare")
    args = p.parse_args(argv)
    bad = set(args.precision.split(",")) - set(PRECISIONS)
    if bad or args.rounds < 1 or args.threads < 1 or args.trials < 1:
        p.error(f"--precision takes {', '.join(PRECISIONS)}; --rounds, --threads and --trials at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        binary = build(args.build_dir)
        root = args.keep or Path(tempfile.mkdtemp(prefix="deepbench-mkl-sbs-"))
        root.mkdir(parents=True, exist_ok=True)
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
        kernels, last = rounds(args, binary, root)
        report(kernels, args)
        if not args.no_torch:
            compare_with_torch(args, last, root)
        print(f"results in {root}")
    except UsageError as exc:
        print(f"mkl_side_by_side: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
