"""How the engine race's margin trades against the 5% target (issue 20), from recorded evidence only
(no GPU): a script that prints its figures.

The race (kernels/backends/engine_choice.py) keeps cuDNN's higher-ranked plan when it is within MARGIN
of the fastest correct one on the run's machine, so that a few percent of noise between machines
cannot flip the choice. Checked on another machine, such a plan can read more than 5% over that
machine's fastest candidate (conv/train/020 fp16 bwd_filter: 1.029 in the race, 1.049 and 1.061 on
two other H100s). For each margin asked, this re-plays the rule on the run's recorded candidate
figures (their rank and quick_us; rejected ones stay out, unchecked ones count as correct) and reads
the plan it would choose in each candidate pass given (native_side_by_side.py --json of the same run,
every candidate timed by conv_loop on another machine): how many directions of 20 us or more would
be within 5% of that machine's fastest candidate, and how many would choose another plan than the
run did (a change of plan is a change of the published figure).

With --repeat RUN_B it asks what the margin costs the repeatability target instead (two runs on two
machines within 3% for 95% of the directions): the rule re-played on each run's own race, each run's
time for the plan it picks estimated from its race figure (scaled by the run's final median over the
race figure of the plan it did choose, so that the run's own margin gives the measured times), the two
compared as conv_repeatability.py compares them, and how many directions would pick the same plan.

    python tests/benchmarks/choice_margin.py runner/published/nvidia-h100/train \\
        tests/benchmarks/results/train-conv-choice-h100/merged.json.gz \\
        tests/benchmarks/results/train-conv-choice-h100-ebbfffc8/merged.json.gz
    python tests/benchmarks/choice_margin.py tests/benchmarks/results/train-conv-h100-repeat/4685a3b0 \\
        --repeat tests/benchmarks/results/train-conv-h100-repeat/f431853d
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from conv_repeatability import WITHIN, results_of  # beside this file: the repeatability target's band
from native_side_by_side import CHOICE_MARGIN, MIN_US, read_json  # the engine-choice target, the parts it counts

from deepbench.kernels.results import Status

MARGINS = (0.0, 0.01, 0.02, 0.03)


def race_records(run: Path) -> dict[tuple[str, str], tuple[list[dict[str, Any]], float]]:
    """(result id, direction) -> the race's candidate rows as the run recorded them, and the median
    the run measured for the plan it chose, for every ok convolution direction."""
    out = {}
    for r in results_of(run):
        if r.status is not Status.OK:
            continue
        for p in r.parts:
            cudnn = p.info.get("cudnn") or {}
            if cudnn.get("candidates"):
                out[(r.id, p.direction)] = (cudnn["candidates"], p.measurement.stats.median)
    return out


def replay(candidates: list[dict[str, Any]], margin: float) -> str | None:
    """The plan engine_choice's rule picks from recorded figures under `margin` (None: nothing timed)."""
    timed = [c for c in candidates if c.get("status") != "rejected" and isinstance(c.get("quick_us"), float)]
    if not timed:
        return None
    limit = min(c["quick_us"] for c in timed) * (1 + margin)
    return str(min((c for c in timed if c["quick_us"] <= limit), key=lambda c: c["rank"])["plan_name"])


def estimated_us(candidates: list[dict[str, Any]], median_us: float, plan: str) -> float:
    """The run's time for `plan`, from its race figure scaled as the chosen plan's race figure was."""
    figure = {c["plan_name"]: c.get("quick_us") for c in candidates}
    chosen = next(c for c in candidates if c.get("status") == "chosen")
    return float(figure[plan]) * median_us / float(chosen["quick_us"])


def repeatability(run_a: Path, run_b: Path, margins: list[float]) -> None:
    """Per margin: directions of the two runs within WITHIN of each other, and with the same plan."""
    a, b = race_records(run_a), race_records(run_b)
    common = sorted(set(a) & set(b))
    print(f"{'margin':>6} {'dirs':>5} {'within 3%':>9} {'share':>6} {'same plan':>9}")
    for margin in margins:
        within = same = 0
        for key in common:
            plans = [replay(rec[0], margin) for rec in (a[key], b[key])]
            times = [estimated_us(rec[0], rec[1], plan) for rec, plan in zip((a[key], b[key]), plans, strict=True)
                     if plan is not None]
            within += len(times) == 2 and abs(times[1] / times[0] - 1) <= WITHIN
            same += plans[0] == plans[1]
        print(f"{margin:6.2f} {len(common):5d} {within:9d} {within / len(common):6.1%} {same:9d}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="the results folder whose race is replayed")
    ap.add_argument("passes", type=Path, nargs="*", help="native_side_by_side.py --json files of that run")
    ap.add_argument("--repeat", type=Path, metavar="RUN_B", help="another run of the same convolutions (see above)")
    ap.add_argument("--margins", type=float, nargs="+", default=list(MARGINS))
    args = ap.parse_args(argv)
    if not args.passes and not args.repeat:
        ap.error("give candidate passes (native_side_by_side.py --json files) or --repeat RUN_B")
    try:
        if args.repeat:
            repeatability(args.run, args.repeat, args.margins)
        else:
            by_pass(args.run, args.passes, args.margins)
    except (OSError, ValueError, KeyError) as exc:
        print(f"choice_margin: {exc}", file=sys.stderr)
        return 2
    return 0


def by_pass(run: Path, passes: list[Path], margins: list[float]) -> None:
    """Per candidate pass and margin: directions whose re-played plan is within CHOICE_MARGIN of the fastest."""
    races = {key: rec[0] for key, rec in race_records(run).items()}
    print(f"{'pass (its folder)':40} {'margin':>6} {'dirs':>5} {'within 5%':>9} {'worst':>6} {'other plan':>10}")
    for path in passes:
        rows = [r for r in read_json(path)["rows"] if r.get("harness_us", 0) >= MIN_US and r.get("candidates")]
        for margin in margins:
            within = changed = counted = 0
            worst = 0.0
            for row in rows:
                native = {c["plan"]: c["graph_us"] for c in row["candidates"]
                          if c.get("status") != "rejected" and not math.isnan(c.get("graph_us", math.nan))}
                plan = replay(races.get((row["id"], row["direction"]), []), margin)
                if plan is None or plan not in native:
                    continue
                counted += 1
                ratio = native[plan] / min(native.values())
                within += ratio <= CHOICE_MARGIN
                worst = max(worst, ratio)
                changed += plan != row["plan_name"]
            print(f"{path.parent.name[:40]:40} {margin:6.2f} {counted:5d} {within:9d} {worst:6.3f} {changed:10d}")


if __name__ == "__main__":
    sys.exit(main())
