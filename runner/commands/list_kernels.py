"""Show the kernels a suite and selection would run, in DeepBench's order.

deepbench list --suite train --ops gemm --where m=1760
deepbench list --suite inference-device --format json   # one object per kernel, DeepBench's fields"""

from __future__ import annotations

import argparse
import json

from ...kernels.catalog import traits_of
from ...kernels.op_traits import Rate
from ..render.display import make_console, print_tables
from ..render.tables import Table
from ..selection import add_selection_arguments, selected_kernels

NAME = "list"
HELP = "show the kernels a suite would run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection_arguments(parser, default_suite="smoke")
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table (default) or json: one object per line with op, set and DeepBench's fields",
    )


def run(args: argparse.Namespace) -> int:
    kernels = selected_kernels(args)
    if args.format == "json":
        for k in kernels:
            print(json.dumps(k.listing()))
        return 0
    rows = [
        [
            k.id,
            k.application or "",
            k.label(),
            f"{k.flops() / 1e9:.3f}" if traits_of(k.op).rated_in is Rate.TFLOPS else "",
        ]
        for k in kernels
    ]
    print_tables(
        make_console(),
        [
            Table(
                "list",
                f"suite {args.suite}: {len(kernels)} kernels",
                ["id", "application", "parameters", "GFLOP"],
                rows,
                ("application",),
                ("parameters",),
            )
        ],
        how_to_see="--format json",
    )
    return 0
