"""Do two runs of the same convolutions on two machines agree? (issue 20's repeatability target: at
least 95% of the convolution directions within 3%, each naming its cuDNN engine.)

For every convolution direction both results folders measured `ok`, prints the time on each, their
ratio and the engine each run chose, the directions outside the band first; then a summary line:
how many directions are within WITHIN of each other, and how many chose the same engine. A script,
not a unit test: its input is two GPU runs.

    python tests/benchmarks/conv_repeatability.py RUN_A RUN_B [--md OUT.md]

A folder may hold its results gzipped (results.jsonl.gz), as evidence kept in the repository does.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

from deepbench.kernels.results import RESULTS_FILE, KernelResult, Status
from deepbench.kernels.results_file import read_results

WITHIN = 0.03  # two times agree when they differ by at most 3%
TARGET_SHARE = 0.95  # issue 20: at least 95% of the directions agree


def results_of(folder: Path) -> list[KernelResult]:
    """The folder's results, from results.jsonl or its gzipped copy."""
    plain = folder / RESULTS_FILE
    packed = plain.with_name(plain.name + ".gz")
    if plain.exists():
        return read_results(plain)
    if not packed.exists():
        raise FileNotFoundError(f"{folder} holds neither {RESULTS_FILE} nor {packed.name}: not a results folder")
    with gzip.open(packed, "rt") as lines:
        return [KernelResult.model_validate_json(line) for line in lines if line.strip()]


def directions(folder: Path) -> dict[tuple[str, str], tuple[float, str]]:
    """(result id, direction) -> (median us, cuDNN engine) of every ok convolution part."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for r in results_of(folder):
        if r.op != "conv" or r.status is not Status.OK:
            continue
        for part in r.parts:
            engine = str(part.info.get("cudnn", {}).get("engine", "(not recorded)"))
            out[r.id, part.direction] = (part.measurement.stats.median, engine)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_a", type=Path, help="results folder of the first machine")
    ap.add_argument("run_b", type=Path, help="results folder of the second machine")
    ap.add_argument("--md", type=Path, help="also write the table as Markdown here")
    args = ap.parse_args(argv)
    try:
        a, b = directions(args.run_a), directions(args.run_b)
    except FileNotFoundError as exc:
        print(f"conv_repeatability: {exc}", file=sys.stderr)
        return 2
    both = sorted(set(a) & set(b))
    if not both:
        print("no convolution direction is ok in both folders", file=sys.stderr)
        return 2
    rows = []
    for key in both:
        (ta, ea), (tb, eb) = a[key], b[key]
        rows.append((key, ta, tb, tb / ta, ea, eb))
    within = [row for row in rows if abs(row[3] - 1) <= WITHIN]
    same_engine = sum(row[4] == row[5] for row in rows)
    share = len(within) / len(rows)
    verdict = "PASS" if share >= TARGET_SHARE else "FAIL"
    summary = (
        f"SUMMARY conv repeatability: {len(within)} of {len(rows)} directions ({100 * share:.1f}%) within "
        f"{100 * WITHIN:.0f}%; the same engine for {same_engine}; target {100 * TARGET_SHARE:.0f}%  {verdict}"
    )
    outside = sorted((row for row in rows if abs(row[3] - 1) > WITHIN), key=lambda row: -abs(row[3] - 1))
    lines = ["| id | direction | A us | B us | B/A | engine A | engine B |", "|---|---|---:|---:|---:|---|---|"]
    lines += [
        f"| {rid} | {d} | {ta:.1f} | {tb:.1f} | {ratio:.3f} | {ea} | {eb} |"
        for (rid, d), ta, tb, ratio, ea, eb in outside
    ]
    print("\n".join(lines))
    print(summary)
    if args.md:
        head = [
            f"# Convolution directions on two machines: {args.run_a} (A) and {args.run_b} (B)",
            "",
            f"**{summary.removeprefix('SUMMARY ')}**",
            "",
            "The directions outside the band:",
            "",
        ]
        args.md.write_text("\n".join(head + lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
