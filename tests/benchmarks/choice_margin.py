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

    python tests/benchmarks/choice_margin.py runner/published/nvidia-h100/train \\
        tests/benchmarks/results/train-conv-choice-h100/merged.json.gz \\
        tests/benchmarks/results/train-conv-choice-h100-ebbfffc8/merged.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

from deepbench.kernels.results import RESULTS_FILE
from deepbench.kernels.results_file import read_results

MARGINS = (0.0, 0.01, 0.02, 0.03)
TARGET = 1.05   # issue 20: the chosen engine within 5% of the fastest candidate that passes the check
MIN_US = 20.0   # the target counts directions of 20 us or more


def race_records(run: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(result id, direction) -> the race's candidate rows as the run recorded them."""
    out = {}
    for r in read_results(run / RESULTS_FILE):
        for p in r.parts:
            cudnn = p.info.get("cudnn") or {}
            if cudnn.get("candidates"):
                out[(r.id, p.direction)] = cudnn["candidates"]
    return out


def replay(candidates: list[dict[str, Any]], margin: float) -> str | None:
    """The plan engine_choice's rule picks from recorded figures under `margin` (None: nothing timed)."""
    timed = [c for c in candidates if c.get("status") != "rejected" and isinstance(c.get("quick_us"), float)]
    if not timed:
        return None
    limit = min(c["quick_us"] for c in timed) * (1 + margin)
    return str(min((c for c in timed if c["quick_us"] <= limit), key=lambda c: c["rank"])["plan_name"])


def load_rows(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return list(json.load(f)["rows"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="the results folder whose race is replayed")
    ap.add_argument("passes", type=Path, nargs="+", help="native_side_by_side.py --json files of that run")
    ap.add_argument("--margins", type=float, nargs="+", default=list(MARGINS))
    args = ap.parse_args(argv)
    races = race_records(args.run)
    print(f"{'pass (its folder)':40} {'margin':>6} {'dirs':>5} {'within 5%':>9} {'worst':>6} {'other plan':>10}")
    for path in args.passes:
        rows = [r for r in load_rows(path) if r.get("harness_us", 0) >= MIN_US and r.get("candidates")]
        for margin in args.margins:
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
                within += ratio <= TARGET
                worst = max(worst, ratio)
                changed += plan != row["plan_name"]
            print(f"{path.parent.name[:40]:40} {margin:6.2f} {counted:5d} {within:9d} {worst:6.3f} {changed:10d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
