"""Which run or reference is fastest per kernel, like the tables in DeepBench's README.

  deepbench fastest H200=RUN_A MI300=RUN_B --reference V100 --reference P100
  deepbench fastest RUN --reference train/V100 --format md --out fastest.md

Kernels are matched as in `deepbench compare` (kernel id between runs, DeepBench parameters
when a reference takes part). Columns: each source's median time, the fastest source, its time
and throughput, and how much slower the next one is (x next)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..display import make_console, print_tables
from ..errors import UserError
from ..fastest import fastest_tables, wins
from ..html import page, table_html, table_section
from ..sources import load_source
from ..textformats import csv_text, markdown
from ..outpaths import writable_file

NAME = "fastest"
HELP = "the fastest run or reference per kernel"
FORMATS = ("table", "md", "csv", "html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="results folders (or reference names); LABEL=FOLDER names a column")
    parser.add_argument("--reference", action="append", default=[], metavar="NAME", help="add a reference; repeatable")
    parser.add_argument("--match", choices=("auto", "id", "params"), default="auto")
    parser.add_argument("--any-precision", action="store_true", help="one row per kernel whatever the precision")
    parser.add_argument("--all-kernels", action="store_true",
                        help="every kernel of every source (default with runs given: the kernels the runs have)")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--out", type=Path, metavar="FILE")


def run(args: argparse.Namespace) -> int:
    if not args.runs and not args.reference:
        raise UserError("give runs and/or --reference NAME (see deepbench references)")
    if args.out is not None:
        writable_file(args.out)
    sources = [load_source(r) for r in args.runs]
    prefer = sources[0].set if sources else None
    sources += [load_source(f"ref:{n}", prefer) for n in args.reference]
    labels = [s.label for s in sources]
    if len(set(labels)) != len(labels):
        raise UserError(f"the same source was given twice: {', '.join(labels)}")
    tables = fastest_tables(sources, None if args.match == "auto" else args.match, args.any_precision,
                            args.all_kernels)
    summary = wins(tables, sources)
    if args.format == "table" and args.out is None:
        console = make_console()
        print_tables(console, tables + [summary])
        return 0
    if args.format == "csv":
        text = csv_text(tables)
    elif args.format == "html":
        text = page("DeepBench: fastest per kernel",
                    [f"<h2>{summary.title}</h2>" + table_html(summary.headers, summary.rows, "table-wins")]
                    + [table_section(t, f"table-{t.op}") for t in tables])
    else:
        text = markdown(tables + [summary]) + "\n"
    if args.out is None:
        print(text, end="")
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0
