"""Do two runs of the same command on two GPUs of one model agree once their clocks are taken out?
Issue 44's target: two `train` GEMM runs on two cards agree within 3% in cycles for at least 95% of
the compute-bound kernels, memory-bound ones judged with the memory clock beside.

For every kernel both runs timed (`deepbench compare`'s matching, on the directions both timed): the
time ratio B / A, each side's median SM and memory clock (`measurement.clocks_mhz`,
`measurement.mem_clock_mhz`), and the ratio in cycles: time x the clock that bounds the kernel (the SM
clock; the memory clock for a kernel the roofline calls memory-bound), as `deepbench compare` judges
cycles (runner/analysis/like_for_like.py). Kernels under --min-us are counted apart: at a few
microseconds the launch, not the clock, sets the time. A script, not a unit test: its inputs are GPU
runs (tests/test_cycles.py tests the comparison's cycle verdicts on recorded clocks).

    python tests/benchmarks/cycles_agreement.py RUN_A RUN_B [--within 0.03] [--min-us 20]

Exit status: 0 when at least --target of the compute-bound kernels agree in cycles, 1 when not, 2 when
a run cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.result_extras import MEMORY_BOUND
from deepbench.runner.analysis.sources import Entry, Source, load_source
from deepbench.runner.errors import UserError

WITHIN = 0.03
TARGET = 0.95
MIN_US = 0.0  # every kernel by default; the issue counts all compute-bound ones


@dataclass(frozen=True)
class Kernel:
    """One kernel of both runs: its time ratio, its clocks and its ratio in cycles."""

    name: str
    base_us: float
    time: float
    clock: str  # the clock the cycles are taken in: "sm" or "memory"
    base_mhz: float | None
    other_mhz: float | None

    @property
    def cycles(self) -> float:
        """The time ratio times the clock ratio (the time ratio where a side did not record its clock)."""
        if self.base_mhz and self.other_mhz:
            return self.time * self.other_mhz / self.base_mhz
        return self.time


def kernels(base: Source, other: Source) -> list[Kernel]:
    """Every kernel both runs timed, in the comparison's order."""
    cmp = compare([base, other])
    out = []
    for row in cmp.rows:
        a, b, ratio = row.base, row.others[0], row.ratios[0]
        if a is None or b is None or ratio is None:
            continue
        memory = a.extra.get("bound") == MEMORY_BOUND
        key = "mem_mhz" if memory else "sm_mhz"
        out.append(
            Kernel(
                name=f"{a.kernel.id}/{a.precision}",
                base_us=ratio.base_us,
                time=ratio.ratio,
                clock="memory" if memory else "sm",
                base_mhz=_mhz(a, key),
                other_mhz=_mhz(b, key),
            )
        )
    return out


def _mhz(e: Entry, key: str) -> float | None:
    value = e.extra.get(key)
    return float(value) if value else None


def summary(found: list[Kernel], within: float, min_us: float) -> tuple[list[str], bool]:
    """The SUMMARY lines, and whether the compute-bound kernels meet the target."""
    lines, met = [], False
    for clock, label in (("sm", "compute-bound (SM clock)"), ("memory", "memory-bound (memory clock)")):
        group = [k for k in found if k.clock == clock and k.base_us >= min_us]
        if not group:
            continue
        in_cycles = sum(abs(k.cycles - 1) <= within for k in group)
        in_time = sum(abs(k.time - 1) <= within for k in group)
        apart = sum(1 for k in group if k.base_mhz and k.other_mhz and abs(k.other_mhz / k.base_mhz - 1) > 0.02)
        share = in_cycles / len(group)
        lines.append(
            f"SUMMARY {label}: {len(group)} kernels of {min_us:g} us or more; within {within:.0%} in cycles: "
            f"{in_cycles} ({share:.1%}); in time: {in_time}; {apart} ran at clocks more than 2% apart"
        )
        if clock == "sm":
            met = share >= TARGET
    return lines, met


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="run A: a results folder (the baseline)")
    ap.add_argument("other", help="run B: a results folder of the same command on another GPU")
    ap.add_argument("--within", type=float, default=WITHIN, metavar="FRACTION", help=f"band (default {WITHIN:g})")
    ap.add_argument(
        "--min-us", type=float, default=MIN_US, metavar="US", help="count kernels A timed at US or more (default: all)"
    )
    args = ap.parse_args(argv)
    try:
        found = kernels(load_source(args.base), load_source(args.other))
    except (UserError, OSError, ValueError) as exc:
        print(f"cycles_agreement: {exc}", file=sys.stderr)
        return 2
    if not found:
        print("cycles_agreement: the two runs have no kernel in common", file=sys.stderr)
        return 2
    print(f"{'kernel':28} {'A us':>9} {'time B/A':>9} {'clock':>6} {'A MHz':>6} {'B MHz':>6} {'cycles B/A':>10}")
    for k in sorted(found, key=lambda k: abs(k.cycles - 1), reverse=True):
        if abs(k.cycles - 1) > args.within or abs(k.time - 1) > args.within:
            a_mhz, b_mhz = (f"{m:6.0f}" if m else f"{'-':>6}" for m in (k.base_mhz, k.other_mhz))
            print(f"{k.name:28} {k.base_us:9.1f} {k.time:9.3f} {k.clock:>6} {a_mhz} {b_mhz} {k.cycles:10.3f}")
    lines, met = summary(found, args.within, args.min_us)
    print("\n".join(lines))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
