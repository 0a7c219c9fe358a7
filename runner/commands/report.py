"""DeepBench-style tables for one run (or one published reference), in several formats.

  deepbench report deepbench-results/RUN_ID                    # terminal tables, fitted to its width
  deepbench report RUN --columns all                           # every column (rows fold if need be)
  deepbench report RUN --format md --out report.md             # also csv
  deepbench report RUN --format xlsx --out run.xlsx            # a sheet per precision + Specs, like DeepBench's
  deepbench report RUN --format html --out run.html            # one offline file: sortable tables, rooflines
  deepbench report V100 --format html                          # a published reference (see deepbench references)
  deepbench report RUN --nccl-tests all_reduce_perf.txt        # collectives beside nccl-tests' output (repeatable)

Per operation: DeepBench's columns (application, parameters, precision, time, TFLOPS or GB/s),
the time of each direction, the noise (IQR over the median), the roofline bound and % of the
measured peak (blank where the run measured no ceilings), status, check and the notes of figures
that cannot be true as they stand (runner/analysis/sanity.py); then a summary per operation and precision.
With --nccl-tests, a run's collectives then stand beside nccl-tests' figures for the same collective,
ranks, size and method (runner/analysis/nccl_tests_side_by_side.py), with a SUMMARY line against the targets."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..analysis.nccl_tests import NcclTestsError, Output
from ..analysis.nccl_tests import read as read_nccl_tests
from ..analysis.nccl_tests_side_by_side import harness_figures, pair_up, summary
from ..analysis.sources import load_source, read_run_folder
from ..errors import UserError
from ..outpaths import writable_file
from ..render import render_formats
from ..render.display import add_columns_argument, make_console, print_tables
from ..render.nccl_tests_table import side_by_side_tables
from ..render.report_render import write_report

NAME = "report"
HELP = "tables, workbook or HTML report of a run or reference"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="a results folder written by deepbench-run, or a reference name")
    parser.add_argument(
        "--format",
        choices=render_formats.choices(render_formats.REPORT),
        default=render_formats.DEFAULT_FORMAT,
        help="default: table (terminal)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write here (default: standard output; xlsx/html: report-<run>.<ext> here)",
    )
    parser.add_argument(
        "--nccl-tests",
        action="append",
        type=Path,
        metavar="FILE",
        help="nccl-tests' text output (all_reduce_perf ..., one binary or several per file; "
        "repeatable): the run's collectives beside it, for a results folder, terminal format",
    )
    add_columns_argument(parser)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        writable_file(args.out)
    outputs = _nccl_tests(args)
    source = load_source(args.run)
    written = write_report(source, args.format, args.out, args.columns)
    if written:
        print(f"wrote {written}")
    if outputs is not None:
        results, _ = read_run_folder(Path(args.run))
        pairs, alone = pair_up(harness_figures(results), outputs)
        console = make_console()
        print_tables(console, side_by_side_tables(pairs), args.columns)
        console.print(summary(pairs, len(alone)), highlight=False, soft_wrap=True)
    return 0


def _nccl_tests(args: argparse.Namespace) -> list[Output] | None:
    """nccl-tests' outputs the user gave, read before anything is written (a mistake is one line)."""
    if not args.nccl_tests:
        return None
    if args.format != render_formats.DEFAULT_FORMAT or args.out is not None:
        raise UserError("--nccl-tests prints its side-by-side on the terminal: leave out --format and --out")
    if not Path(args.run).is_dir():
        raise UserError(f"--nccl-tests needs a results folder written by deepbench-run, not '{args.run}'")
    try:
        return [o for path in args.nccl_tests for o in read_nccl_tests(path)]
    except NcclTestsError as exc:
        raise UserError(str(exc)) from None
