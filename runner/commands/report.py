"""DeepBench-style tables for one run (or one published reference), in several formats.

  deepbench report deepbench-results/RUN_ID                    # terminal tables, fitted to its width
  deepbench report RUN --columns all                           # every column (rows fold if need be)
  deepbench report RUN --format md --out report.md             # also csv
  deepbench report RUN --format xlsx --out run.xlsx            # a sheet per precision + Specs, like DeepBench's
  deepbench report RUN --format html --out run.html            # one offline file: sortable tables, rooflines
  deepbench report V100 --format html                          # a published reference (see deepbench references)

Per operation: DeepBench's columns (application, parameters, precision, time, TFLOPS or GB/s),
the time of each direction, the noise (IQR over the median), the roofline bound and % of the
measured peak (blank where the run measured no ceilings), status, check and the notes of figures
that cannot be true as they stand (runner/analysis/sanity.py); then a summary per operation and precision."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..analysis.sources import load_source
from ..outpaths import writable_file
from ..render import render_formats
from ..render.display import add_columns_argument
from ..render.report_render import write_report

NAME = "report"
HELP = "tables, workbook or HTML report of a run or reference"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="a results folder written by deepbench-run, or a reference name")
    parser.add_argument("--format", choices=render_formats.choices(render_formats.REPORT),
                        default=render_formats.DEFAULT_FORMAT, help="default: table (terminal)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="write here (default: standard output; xlsx/html: report-<run>.<ext> here)")
    add_columns_argument(parser)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        writable_file(args.out)
    source = load_source(args.run)
    written = write_report(source, args.format, args.out, args.columns)
    if written:
        print(f"wrote {written}")
    return 0
