"""Compare runs (and DeepBench's published references) kernel by kernel, noise included.

  deepbench compare RUN_A RUN_B                      # B against A (the baseline): "B vs A: 1.30x faster"
  deepbench compare RUN --reference V100             # this run against DeepBench's V100 (the baseline)
  deepbench compare RUN_A RUN_B RUN_C --format html --out cmp.html

The baseline is the first RUN, or the first --reference when one is given (a run is compared
against the published figures); every other source is compared with it, and every table says
"OTHER vs BASELINE: 6.30x faster". Kernels are matched by kernel id and precision between runs, by
DeepBench's parameters and precision when a reference takes part (--any-precision pairs across
precisions). Per kernel: both medians, the ratio (other / baseline time, over the directions both
timed), its 95% interval from a bootstrap of both sides' raw samples (a published figure: its
1 us rounding), and a verdict: same (interval within ±threshold), faster / slower (interval
excludes 1 and the ratio passes the threshold), unclear (anything else). Then per operation the
geometric mean of the ratios, and the kernels each side lacks. A side measured on a loaded
machine (its run.json's noise record) is named at the top."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..analysis.compare import DEFAULT_THRESHOLD, compare
from ..analysis.like_for_like import notes
from ..analysis.sources import load_source, short_labels
from ..analysis.unlike import refusal
from ..errors import UserError
from ..outpaths import writable_file
from ..render import render_formats
from ..render.compare_render import render
from ..render.display import add_columns_argument, make_console, print_entry

NAME = "compare"
HELP = "compare runs and references kernel by kernel, with noise"
TERMINAL_ONLY_ROWS = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="results folders (or reference names), LABEL=FOLDER to name one (default: "
        "the device's model, e.g. H100, with A, B ... when two are equal); the first is the "
        "baseline",
    )
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="NAME",
        help="compare against a DeepBench reference (e.g. V100, train/T4; see deepbench references): "
        "the first one is the baseline; repeatable",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        metavar="FRACTION",
        help=f"smallest difference that counts (default {DEFAULT_THRESHOLD})",
    )
    parser.add_argument(
        "--match",
        choices=("auto", "id", "params"),
        default="auto",
        help="kernel id (runs of one catalog) or DeepBench parameters (auto: params when a reference takes part)",
    )
    parser.add_argument(
        "--any-precision",
        action="store_true",
        help="pair a kernel across precisions (the other's row in the baseline's precision where it has one)",
    )
    parser.add_argument(
        "--format", choices=render_formats.choices(render_formats.COMPARE), default=render_formats.DEFAULT_FORMAT
    )
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="write here (default: standard output; html: comparison.html)"
    )
    parser.add_argument(
        "--allow-unlike",
        action="store_true",
        help="compare runs that ran different problems (another backend, padding, inputs or layout): refused "
        "without it, and named in the heading with it",
    )
    add_columns_argument(parser)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.threshold < 1:
        raise UserError(f"--threshold must be a fraction between 0 and 1, not {args.threshold}")
    if args.out is not None:
        writable_file(args.out)
    runs = [load_source(args.runs[0])]
    prefer = runs[0].set
    runs += [load_source(r, prefer) for r in args.runs[1:]]
    refs = [load_source(f"ref:{name}", prefer) for name in args.reference]
    sources = refs[:1] + runs + refs[1:]  # a reference given is what the runs are measured against
    if len(sources) < 2:
        raise UserError("compare needs two sources: RUN_A RUN_B, or RUN --reference NAME")
    sources = short_labels(sources)
    cmp = compare(sources, args.threshold, None if args.match == "auto" else args.match, args.any_precision)
    refused = refusal(cmp.differences, "compare")
    if refused and not args.allow_unlike:
        raise UserError(refused)
    if not any(any(x is not None for x in r.others) for r in cmp.rows):
        raise UserError(
            f"no kernel of {sources[0].label} (the baseline) is in the other sources in the same precision "
            "(try --any-precision, or --match params for runs of different suites)"
        )
    written = render(cmp, args.format, args.out, max_only=TERMINAL_ONLY_ROWS, columns=args.columns)
    if written:
        print(f"wrote {written}")
    err = make_console(stderr=True)
    for line in notes(cmp):  # inputs and clocks beside the times (standard error: any format stays parseable)
        label, sep, text = line.partition(": ")
        if sep and label == "warning":
            print_entry(err, "[yellow]warning:[/]", text)
        else:
            print_entry(err, "", line)
    return 0
