"""How far does each side of a native side-by-side move between sittings? Reads two or more JSON files
that `native_side_by_side.py --json` wrote for the same problems (the same GPU, minutes apart) and
prints, per problem, the harness/native ratio of each file and how much the harness's time and the
native loop's time moved from the first file to each later one; then per operation and precision how
many ratios lie in the side-by-side's band, and how many of each side's times stayed within WITHIN.

Where a GPU sits at its power cap, a long compute-bound kernel runs at whatever clock the card's
temperature allows at that minute, and the native loop disagrees with itself by as much as the
harness disagrees with it: this script puts the two figures side by side. A script, not a unit test:
its inputs are GPU sittings.

    python tests/benchmarks/sbs_repeat.py A.json B.json [C.json ...] [--only GLOB]
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path
from typing import Any

# Beside this file: a side "stayed" when its time moved by at most WITHIN (3%) between files, the
# repeatability target's band; BAND is issue 20's harness/native band; read_json reads .json or .json.gz.
from conv_repeatability import WITHIN
from native_side_by_side import WITHIN as BAND
from native_side_by_side import read_json


def rows_of(path: Path) -> dict[str, dict[str, Any]]:
    """The file's compared rows (those with a ratio), by result id and direction."""
    return {f"{r['id']} {r['direction']}": r for r in read_json(path)["rows"] if r.get("ratio")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="native_side_by_side.py --json outputs (.json or .json.gz)")
    ap.add_argument("--only", metavar="GLOB", help="problems whose id matches, e.g. 'gemm/*/fp16'")
    args = ap.parse_args(argv)
    if len(args.files) < 2:
        ap.error("give two or more files: the same problems side by side in different sittings")
    try:
        runs = [rows_of(p) for p in args.files]
    except (OSError, ValueError, KeyError) as e:
        print(f"sbs_repeat: cannot read a side-by-side file: {e}", file=sys.stderr)
        return 2
    keys = [k for k in runs[0] if all(k in r for r in runs[1:])
            and (not args.only or fnmatch.fnmatch(k.split()[0], args.only))]
    if not keys:
        print("sbs_repeat: no problem is compared in every file", file=sys.stderr)
        return 1
    later = range(1, len(runs))
    print(f"{'problem':48} " + " ".join(f"ratio{i}" for i in range(len(runs)))
          + " " + " ".join(f"harness{i}/0 native{i}/0" for i in later))
    groups: dict[str, list[str]] = {}
    for k in keys:
        first = runs[0][k]
        groups.setdefault(f"{first['op']} {first['precision']}", []).append(k)
        moves = [f"{r[k]['harness_us'] / first['harness_us']:10.3f} "
                 f"{r[k]['native_best_us'] / first['native_best_us']:9.3f}" for r in runs[1:]]
        print(f"{k:48} " + " ".join(f"{r[k]['ratio']:6.3f}" for r in runs) + " " + " ".join(moves))
    print()
    for group, ks in groups.items():
        in_band = [sum(BAND[0] <= r[k]["ratio"] <= BAND[1] for k in ks) for r in runs]
        print(f"SUMMARY {group}: {len(ks)} problems; harness/native within [{BAND[0]}, {BAND[1]}] per file: "
              + ", ".join(f"{n} ({n / len(ks):.1%})" for n in in_band))
        for i in later:
            stayed = {side: sum(abs(runs[i][k][field] / runs[0][k][field] - 1) <= WITHIN for k in ks)
                      for side, field in (("harness", "harness_us"), ("native", "native_best_us"))}
            print(f"SUMMARY {group}: file {i} against file 0, times within {WITHIN:.0%}: "
                  f"harness {stayed['harness']} of {len(ks)}, native loop {stayed['native']} of {len(ks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
