#!/usr/bin/env python3
"""The harness's collectives beside nccl-tests, per collective and size: both busbw, their ratio, both
times, and a SUMMARY line against issue 47's targets (>= 4 MiB: busbw within 5%; at 100,000 floats:
time within 1.5x).

    python tests/benchmarks/collectives_vs_nccl_tests.py RUN [RUN ...] --nccl-tests FILE [FILE ...] [--json OUT]

RUN: folders written by `deepbench-run --suite collectives --ranks N` (graph and eager runs may both be
given); FILE: nccl-tests' text output (several binaries per file allowed). Pairs are made only for the
same collective, ranks, size (nccl-tests' bytes) and method (nccl-tests -G beside the harness's graph
timing, plain beside eager): runner/analysis/nccl_tests_side_by_side.py. `deepbench report RUN --nccl-tests
FILE` prints the same for one run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deepbench.runner.analysis.nccl_tests import NcclTestsError
from deepbench.runner.analysis.nccl_tests import read as read_nccl_tests
from deepbench.runner.analysis.nccl_tests_side_by_side import harness_figures, pair_up, summary
from deepbench.runner.analysis.sources import read_run_folder
from deepbench.runner.errors import UserError
from deepbench.runner.render.display import make_console, print_tables
from deepbench.runner.render.nccl_tests_table import side_by_side_tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="deepbench-run results folders")
    parser.add_argument(
        "--nccl-tests", nargs="+", type=Path, required=True, metavar="FILE", help="nccl-tests' output files"
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the pairs and the summary here")
    args = parser.parse_args(argv)
    try:
        outputs = [o for path in args.nccl_tests for o in read_nccl_tests(path)]
        figures = [f for run in args.runs for f in harness_figures(read_run_folder(run)[0])]
    except (NcclTestsError, UserError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pairs, alone = pair_up(figures, outputs)
    console = make_console()
    print_tables(console, side_by_side_tables(pairs), ["all"])
    for f in alone:
        console.print(
            f"no nccl-tests figure: {f.op} {f.bytes} B {f.direction} {f.method} on {f.ranks} ranks",
            highlight=False,
            soft_wrap=True,
        )
    line = summary(pairs, len(alone))
    console.print(line, highlight=False, soft_wrap=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "summary": line,
                    "pairs": [p.model_dump() for p in pairs],
                    "unmatched": [f.model_dump() for f in alone],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
