"""Each suite's wall time beside DeepBench's binaries' for the same sets, per operation and precision, and the ratio
(issue 56: `train` took 10 to 60 times DeepBench's binaries' wall time on an H200).

    python tests/benchmarks/suite_pace.py RUN [RUN ...] --deepbench deepbench-binaries.tsv [--goal SECONDS]
    python tests/benchmarks/suite_pace.py --families COLD WARM

Per run (a deepbench-run folder), per operation and precision: the kernels, the harness's seconds (each result's
start to end, summed), DeepBench's binary's seconds for the same set, operation and precision, and harness over
DeepBench; then the groups that have a binary's row summed (harness against binaries), and the run's own wall time
(its segments).
Beside them, what the pace is made of: for cuDNN's convolutions where each direction's engine came from (a race
over the whole search, the engine cache, the shipped db), the search's mean configurations tried, built, timed and
screened out per searched direction, and the race's seconds; for every GPU part how many the calm floor stopped
(info.calm_floor). With --goal the run's wall time is held against SECONDS, and every kernel against its check:
a SUMMARY line says PASS or FAIL (exit status 1 on a FAIL).

DeepBench's binaries' times come from a file, never from this script: --deepbench names a tab-separated table, one
row per binary run: SUITE, OP, PRECISION (as the harness names them: train conv fp32, inference-server conv int8,
train gemm fp16acc16 for gemm_bench's half call), SECONDS and the COMMAND it was. tests/benchmarks/pace_gpu.sh
writes it in the same sitting, each binary timed by the shell around it (`deepbench-binaries.tsv`); a row copied by
hand from an earlier sitting's logs says so in its COMMAND. Lines starting with # are comments.

--families COLD WARM: for every convolution direction both runs hold, whether they ran the same plan and the same
engine family (info.cudnn.plan_name, family): a warm run's cache must choose what the cold run's race chose
(exit status 1 where a family differs).

Exit status: 0; 1 when a --goal or --families check fails; 2 when a run or the table cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from where_time_went import run_wall

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.backends.cudnn.declaration import CudnnPartInfo
from deepbench.kernels.results import KernelResult, RunRecord, Status
from deepbench.kernels.timing.part_notes import TimerNotes
from deepbench.runner.analysis.sources import read_run_folder
from deepbench.runner.errors import UserError

BINARY_FIELDS = ("suite", "op", "precision", "seconds", "command")
CENSUS_MEANS = ("tried", "built", "raced", "screened_out", "ruled_out")


class TableError(ValueError):
    """The binaries' table cannot be read: one line."""


@dataclass(frozen=True)
class Binary:
    """One DeepBench binary run: its seconds and the command it was."""

    seconds: float
    command: str


def read_binaries(path: Path) -> dict[tuple[str, str, str], Binary]:
    """The table --deepbench names: (suite, op, precision) -> the binary's run (two rows of one key: summed, as
    two binaries of one set are, e.g. a set split over two commands)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise TableError(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    rows: dict[tuple[str, str, str], Binary] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != len(BINARY_FIELDS):
            raise TableError(f"{path}:{number}: {len(cells)} tab-separated cells, not {len(BINARY_FIELDS)}")
        suite, op, precision, seconds, command = cells
        try:
            value = float(seconds)
        except ValueError:
            raise TableError(f"{path}:{number}: seconds {seconds!r} is not a number") from None
        key = (suite, op, precision)
        before = rows.get(key)
        rows[key] = Binary(
            value + (before.seconds if before else 0.0), command if not before else f"{before.command}; {command}"
        )
    return rows


@dataclass
class Group:
    """One operation and precision of a run."""

    kernels: int = 0
    seconds: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    unchecked: int = 0  # ok results with a part whose check did not pass (none may be)
    engine_from: Counter[str] = field(default_factory=Counter)
    census: Counter[str] = field(default_factory=Counter)  # summed over the searched directions
    searched: int = 0
    race_s: float = 0.0
    gpu_parts: int = 0
    calm: int = 0

    def add(self, r: KernelResult) -> None:
        self.kernels += 1
        self.seconds += (r.ended_at - r.started_at).total_seconds() if r.ended_at else 0.0
        self.statuses[r.status.value] += 1
        if r.status is Status.OK and not all(p.check is not None and p.check.passed for p in r.parts):
            self.unchecked += 1
        for part in r.parts:
            self._part(part.info)

    def _part(self, info: dict) -> None:
        notes = info_of(TimerNotes, info)
        if part_is_gpu(info):
            self.gpu_parts += 1
            self.calm += bool(notes and notes.calm_floor)
        cudnn = info_of(CudnnPartInfo, info)
        if cudnn is None:
            return
        plan = cudnn.cudnn
        self.engine_from[plan.engine_from] += 1
        search = (plan.model_extra or {}).get("search") or {}
        self.race_s += float(search.get("spent_s", 0.0))
        if plan.engine_from == "race" and search:
            self.searched += 1
            self.census.update({k: int(search.get(k, 0)) for k in CENSUS_MEANS})


def part_is_gpu(info: dict) -> bool:
    """Whether the GPU timer timed the part (its clock reference is recorded)."""
    return "sm_clock_reference_mhz" in info


def groups(results: Iterable[KernelResult]) -> dict[tuple[str, str], Group]:
    out: dict[tuple[str, str], Group] = defaultdict(Group)
    for r in results:
        out[(r.op, r.precision.name.value)].add(r)
    return dict(sorted(out.items()))


def ratio_text(harness: float, binary: Binary | None) -> tuple[str, str]:
    if binary is None:
        return f"{'-':>10}", f"{'-':>7}"
    return f"{binary.seconds:>10.1f}", f"{harness / binary.seconds:>7.1f}" if binary.seconds > 0 else f"{'-':>7}"


def report(name: str, results: list[KernelResult], run: RunRecord | None, binaries: dict) -> tuple[list[str], float]:
    """The run's lines, and its wall seconds (the kernels' where its record has none)."""
    suite = run.suite if run else "?"
    found = groups(results)
    lines = [
        f"== {name} (suite {suite})",
        f"{'op/precision':<20}{'kernels':>8}{'harness s':>11}{'deepbench s':>12}{'ratio':>7}  made of",
    ]
    matched, theirs_s = 0.0, 0.0
    for (op, precision), g in found.items():
        binary = binaries.get((suite, op, precision))
        if binary is not None:
            matched, theirs_s = matched + g.seconds, theirs_s + binary.seconds
        theirs, ratio = ratio_text(g.seconds, binary)
        lines.append(f"{op + '/' + precision:<20}{g.kernels:>8}{g.seconds:>11.1f}{theirs}{ratio}  {made_of(g)}")
    if theirs_s:
        theirs, ratio = ratio_text(matched, Binary(theirs_s, ""))
        lines.append(f"{'those with a binary':<28}{matched:>11.1f}{theirs}{ratio}")
    whole = run_wall(run)
    wall = whole if whole is not None else sum(g.seconds for g in found.values())
    lines.append(f"{'run (wall)':<20}{sum(g.kernels for g in found.values()):>8}{wall:>11.1f}")
    return lines, wall


def made_of(g: Group) -> str:
    """What the group's pace is made of: engines' sources and the search's breadth, the calm floor's share."""
    bits = []
    if g.engine_from:
        bits.append("engines " + ", ".join(f"{k} {v}" for k, v in sorted(g.engine_from.items())))
        bits.append(f"race {g.race_s:.1f} s")
    if g.searched:
        means = ", ".join(f"{k} {g.census[k] / g.searched:.0f}" for k in CENSUS_MEANS)
        bits.append(f"per searched direction: {means}")
    if g.gpu_parts:
        bits.append(f"calm floor {g.calm}/{g.gpu_parts} parts")
    if g.unchecked or set(g.statuses) - {Status.OK.value}:
        bits.append("statuses " + ", ".join(f"{k} {v}" for k, v in sorted(g.statuses.items())))
    return "; ".join(bits)


def goal_line(name: str, wall: float, goal: float, results: list[KernelResult]) -> tuple[str, bool]:
    """The SUMMARY line of a --goal: the wall time within it, every kernel measured and checked."""
    ok = [r for r in results if r.status is Status.OK]
    unchecked = [r.id for r in ok if not all(p.check is not None and p.check.passed for p in r.parts)]
    broken = [r.id for r in results if r.status in (Status.FAILED, Status.TIMEOUT)]
    passed = wall <= goal and not unchecked and not broken
    line = (
        f"SUMMARY {name}: {wall:.1f} s wall against a goal of {goal:.0f} s; {len(ok)} of {len(results)} kernels ok, "
        f"{len(ok) - len(unchecked)} checked, {len(broken)} failed or timed out  {'PASS' if passed else 'FAIL'}"
    )
    return line, passed


def families(cold: list[KernelResult], warm: list[KernelResult]) -> tuple[list[str], bool]:
    """Whether the warm run's convolution directions ran the cold run's plans and families."""

    def plans(results: list[KernelResult]) -> dict[str, tuple[str, str, str]]:
        out = {}
        for r in results:
            for p in r.parts if r.status is Status.OK else ():
                info = info_of(CudnnPartInfo, p.info)
                if info is not None:
                    plan = info.cudnn
                    family = str((plan.model_extra or {}).get("family", ""))
                    out[f"{r.id}/{p.direction}"] = (plan.plan_name, family, plan.engine_from)
        return out

    a, b = plans(cold), plans(warm)
    both = sorted(set(a) & set(b))
    same_plan = [d for d in both if a[d][0] == b[d][0]]
    differ = [d for d in both if a[d][1] != b[d][1]]
    sources = Counter(b[d][2] for d in both)
    lines = [f"{d}: cold {a[d][0]} ({a[d][1]}), warm {b[d][0]} ({b[d][1]}, {b[d][2]})" for d in differ]
    lines.append(
        f"SUMMARY families: {len(both)} convolution directions in both runs; the same plan {len(same_plan)}, "
        f"the same family {len(both) - len(differ)}; the warm run's engines: "
        + ", ".join(f"{k} {v}" for k, v in sorted(sources.items()))
        + f"  {'PASS' if both and not differ else 'FAIL'}"
    )
    return lines, bool(both) and not differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0; 1 when a check fails; 2 when a file cannot be read.",
    )
    parser.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="deepbench-run results folders")
    parser.add_argument("--deepbench", type=Path, help="the binaries' table (SUITE OP PRECISION SECONDS COMMAND)")
    parser.add_argument("--goal", type=float, help="the runs' wall time at most, in seconds (SUMMARY PASS or FAIL)")
    parser.add_argument("--families", nargs=2, type=Path, metavar=("COLD", "WARM"), help="compare two runs' engines")
    args = parser.parse_args(argv)
    try:
        binaries = read_binaries(args.deepbench) if args.deepbench else {}
        read = [(path, *read_run_folder(path)) for path in args.runs]
        pair = [read_run_folder(p)[0] for p in args.families] if args.families else None
    except (UserError, TableError) as exc:
        print(f"suite_pace: {exc}", file=sys.stderr)
        return 2
    status = 0
    for path, results, run in read:
        lines, wall = report(str(path), results, run, binaries)
        print("\n".join(lines))
        if args.goal is not None:
            line, passed = goal_line(str(path), wall, args.goal, results)
            print(line)
            status |= not passed
    if pair is not None:
        lines, same = families(*pair)
        print("\n".join(lines))
        status |= not same
    if args.deepbench:
        sources = sorted({b.command for b in binaries.values()})
        print(f"DeepBench's binaries: {args.deepbench} ({len(binaries)} rows; commands: {'; '.join(sources)})")
    return status


if __name__ == "__main__":
    sys.exit(main())
