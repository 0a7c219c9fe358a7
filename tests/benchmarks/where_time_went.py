"""Where a run's wall time went: per operation and precision, its kernels' seconds by phase (each
result's `info.wall_s`: kernels/harness/wall_info.py) and, for cuDNN's convolutions, what the engine
race spent. Issue 43 asks for `train` under 10 minutes with checks while cuDNN's engine search is as
wide as cudnnFind; this says which phase to cut, from the run itself (no profiler, no second run).

    python tests/benchmarks/where_time_went.py RUN [RUN ...]

Columns, in seconds summed over the group's kernels: `wall` (each result's start to end), `prepare`
(the backend's prepare: inputs, plans, the race), `first` (each direction's untimed first call),
`timing` (calibration, warm-up, samples), `check`, `after` (--layout both, --pad both) and `other`
(wall minus those). cuDNN's lines: `race apart` (the measuring process waiting for the race's
process), of it `search` (the directions' census `spent_s`: building and timing candidates, checks,
naming the winner's family) with `setup` and `family` apart, and `rebuild` (the measuring process
building the chosen plans again). Results written before `wall_s` existed count in `wall` only. A
last line per run sets the kernels' wall beside the run's own (its segments: what the harness did
between kernels, starting processes, writing results).

Exit status: 0, or 2 when a run cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.harness.wall_info import WallInfo
from deepbench.kernels.results import KernelResult, RunRecord
from deepbench.runner.analysis.sources import read_run_folder
from deepbench.runner.errors import UserError

PHASES = ("prepare", "first", "timing", "check", "after", "other")
CUDNN_PHASES = ("race apart", "search", "setup", "family", "rebuild")


@dataclass
class Group:
    """One operation and precision's seconds."""

    kernels: int = 0
    untimed: int = 0  # results without wall_s (written before it existed)
    wall: float = 0.0
    phases: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    cudnn: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CUDNN_PHASES, 0.0))

    def add(self, r: KernelResult) -> None:
        self.kernels += 1
        wall = (r.ended_at - r.started_at).total_seconds() if r.ended_at else 0.0
        self.wall += wall
        for part in r.parts:  # cuDNN's census is older than wall_s: summed wherever recorded
            plan = part.info.get("cudnn")
            if not isinstance(plan, dict):
                continue
            census = plan.get("search") or {}
            self.cudnn["race apart"] += float(plan.get("race_apart_s", 0.0))
            self.cudnn["rebuild"] += float(plan.get("rebuild_s", 0.0))
            self.cudnn["search"] += float(census.get("spent_s", 0.0))
            self.cudnn["setup"] += float(census.get("setup_s", 0.0))
            self.cudnn["family"] += float(census.get("family_s", 0.0))
        recorded = info_of(WallInfo, r.info)
        if recorded is None or recorded.wall_s is None:
            self.untimed += 1
            return
        w = recorded.wall_s
        parts = w.parts.values()
        seen = {
            "prepare": w.prepare,
            "first": sum(p.first_call for p in parts),
            "timing": sum(p.timing for p in parts),
            "check": sum(p.check for p in parts),
            "after": w.after,
        }
        seen["other"] = wall - w.total
        for name, seconds in seen.items():
            self.phases[name] += seconds


def groups(results: Iterable[KernelResult]) -> dict[tuple[str, str], Group]:
    out: dict[tuple[str, str], Group] = defaultdict(Group)
    for r in results:
        out[(r.op, r.precision.name.value)].add(r)
    return dict(sorted(out.items()))


def run_wall(run: RunRecord | None) -> float | None:
    """The run's own seconds: its segments, start to end (None where a segment has no end)."""
    if run is None or not run.segments or any(s.ended_at is None for s in run.segments):
        return None
    return sum((s.ended_at - s.started_at).total_seconds() for s in run.segments if s.ended_at)


def report(name: str, results: list[KernelResult], run: RunRecord | None) -> list[str]:
    lines = [f"== {name}", f"{'op/precision':<22}{'kernels':>8}{'wall':>9}" + "".join(f"{p:>9}" for p in PHASES)]
    found = groups(results)
    for (op, precision), g in found.items():
        untimed = f"  ({g.untimed} without wall_s)" if g.untimed else ""
        phases = "".join(f"{g.phases[p]:>9.1f}" if g.untimed < g.kernels else f"{'-':>9}" for p in PHASES)
        lines.append(f"{op + '/' + precision:<22}{g.kernels:>8}{g.wall:>9.1f}{phases}{untimed}")
        if any(g.cudnn.values()):
            lines.append(f"{'  cuDNN':<22}" + "  ".join(f"{p} {g.cudnn[p]:.1f}" for p in CUDNN_PHASES))
    kernels_s = sum(g.wall for g in found.values())
    whole = run_wall(run)
    if whole is None:
        lines.append(f"kernels {kernels_s:.1f} s; the run's own is unknown (no run.json, or a segment without an end)")
    else:
        lines.append(f"kernels {kernels_s:.1f} s of the run's {whole:.1f} s ({whole - kernels_s:.1f} s outside them)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Exit status: 0, or 2 when a run cannot be read."
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="deepbench-run results folders")
    args = parser.parse_args(argv)
    try:
        read = [(path, *read_run_folder(path)) for path in args.runs]
    except UserError as exc:
        print(f"where_time_went: {exc}", file=sys.stderr)
        return 2
    for path, results, run in read:
        print("\n".join(report(str(path), results, run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
