"""Which run or reference is fastest per kernel, like the tables in DeepBench's README.

  deepbench fastest H200=RUN_A MI300=RUN_B --reference V100 --reference P100
  deepbench fastest RUN --reference train/V100 --format md --out fastest.md

Kernels are matched as in `deepbench compare` (kernel id between runs, DeepBench parameters
when a reference takes part). Columns: each source's median time, the fastest source, its time
and throughput, the runner-up and how much slower it is ("1.30x slower"). The HTML page starts
with how many kernels each source won, per operation, as a chart and a table."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..analysis.fastest import MIN_SOURCES, fastest_tables, wins
from ..analysis.sources import load_source, short_labels
from ..analysis.unlike import differences, refusal
from ..errors import UserError
from ..outpaths import writable_file
from ..render import render_formats
from ..render.display import add_columns_argument, make_console, print_entry

NAME = "fastest"
HELP = "the fastest run or reference per kernel"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="*", metavar="RUN", help="results folders (or reference names); LABEL=FOLDER names a column"
    )
    parser.add_argument("--reference", action="append", default=[], metavar="NAME", help="add a reference; repeatable")
    parser.add_argument("--match", choices=("auto", "id", "params"), default="auto")
    parser.add_argument("--any-precision", action="store_true", help="one row per kernel whatever the precision")
    parser.add_argument(
        "--all-kernels",
        action="store_true",
        help="every kernel of every source (default with runs given: the kernels the runs have)",
    )
    parser.add_argument(
        "--format", choices=render_formats.choices(render_formats.FASTEST), default=render_formats.DEFAULT_FORMAT
    )
    parser.add_argument("--out", type=Path, metavar="FILE")
    parser.add_argument(
        "--allow-unlike",
        action="store_true",
        help="rank runs that ran different problems (another backend, padding, inputs or layout): refused "
        "without it, and named in the heading with it",
    )
    add_columns_argument(parser)


def run(args: argparse.Namespace) -> int:
    if not args.runs and not args.reference:
        raise UserError("give runs and/or --reference NAME (see deepbench references)")
    if args.out is not None:
        writable_file(args.out)
    sources = [load_source(r) for r in args.runs]
    prefer = sources[0].set if sources else None
    sources += [load_source(f"ref:{n}", prefer) for n in args.reference]
    if len(sources) < MIN_SOURCES:
        raise UserError(
            f"fastest needs at least {MIN_SOURCES} sources to rank (got {len(sources)}): give more runs "
            "or add --reference NAME (see deepbench references)"
        )
    sources = short_labels(sources)
    found = differences(sources)
    refused = refusal(found, "rank")
    if refused and not args.allow_unlike:
        raise UserError(refused)
    err = make_console(stderr=True)
    for d in found:  # the heading (standard error: any format stays parseable)
        print_entry(err, "what differs:", d.text())
    tables = fastest_tables(sources, None if args.match == "auto" else args.match, args.any_precision, args.all_kernels)
    summary = wins(tables, sources)
    written = render_formats.write(
        render_formats.FASTEST, args.format, tables, summary, sources, args.out, columns=args.columns
    )
    if written:
        print(f"wrote {written}")
    return 0
