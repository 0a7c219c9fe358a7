"""Command-line selection options shared by `deepbench list` and `deepbench-run`."""

from __future__ import annotations

import argparse

from ..kernels.catalog import OPS, Kernel
from ..kernels.suites import SUITES, SelectionError, parse_ops, parse_where, select
from .errors import UserError


def add_selection_arguments(parser: argparse.ArgumentParser, default_suite: str | None = "smoke") -> None:
    g = parser.add_argument_group("kernel selection")
    g.add_argument("--suite", default=default_suite, metavar="SUITE",
                   help=f"{', '.join(SUITES)}, model:NAME (default: {default_suite}); the first three are DeepBench's "
                        "sets; model:NAME runs a real model's operators (deepbench models list)")
    g.add_argument("--ops", metavar="OPS", help=f"comma-separated operations: {', '.join(OPS)} (default: all)")
    g.add_argument("--where", action="append", metavar="COND",
                   help="keep kernels whose parameters match, e.g. m=1760, cell=lstm, n<=64 (repeatable; "
                        "all must hold)")
    g.add_argument("--limit", type=int, metavar="N", help="at most N kernels per operation")
    g.add_argument("--batch", type=int, metavar="N", help="model suites: batch size (default 1)")
    g.add_argument("--seq", type=int, metavar="N", help="model suites: sequence length (default: the model's)")


def selected_kernels(args: argparse.Namespace) -> list[Kernel]:
    try:
        return select(args.suite, parse_ops(args.ops), parse_where(args.where), args.limit,
                      getattr(args, "batch", None), getattr(args, "seq", None))
    except SelectionError as exc:
        raise UserError(str(exc)) from None
