"""Check a submission bundle: schema versions, the SHA-256 manifest, completeness of the declared
scope (suite + selection, re-derived from the frozen suite), checks passed, enough samples, and
consistency between the results, the run record and the system description.

  deepbench check BUNDLE
  deepbench check BUNDLE --strict     # warnings and flagged results (noisy, unconverged, throttled) fail too
  deepbench check BUNDLE --allow-modified   # a run from a modified source tree: a warning, not a problem

Every problem is printed with its reason. Exit status: 0 the bundle passes; 1 it has problems;
2 usage error (no such bundle)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ...kernels.results import Status
from ...kernels.results_file import read_results
from ..analysis.flagged import flagged, tally_line
from ..render.display import make_console
from ..submission import layout
from ..submission.checker import check_bundle
from ..submission.show import print_report

NAME = "check"
HELP = "check a submission bundle; non-zero exit on any problem"
EXIT_PROBLEMS = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, metavar="BUNDLE", help="the folder deepbench submit wrote")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="treat warnings as problems, and refuse noisy, "
        "unconverged, throttled or contended results and unsupported results of kernels this tool's "
        "published runs measured on the same platform",
    )
    parser.add_argument(
        "--allow-modified",
        action="store_true",
        help="accept a run made from a modified source "
        "tree (its harness hash is then not this version's; a warning says so)",
    )


def run(args: argparse.Namespace) -> int:
    report = check_bundle(args.bundle, allow_modified=args.allow_modified)
    console = make_console()
    passed = print_report(console, report, strict=args.strict)
    tallied = tally_pass(console, report.flagged, report.ok_results, args.strict)  # the checker's one pass
    return 0 if passed and tallied else EXIT_PROBLEMS


def flags_pass(console: Console, bundle: Path, strict: bool) -> bool:
    """Say how many of a bundle's results are flagged (noisy, unconverged, throttled, contended,
    clock-fell); under --strict any is a problem. Kept apart from the checker's rules
    (runner/submission/checker.py), which check that the flags follow from the samples, not whether a
    submission may carry them."""
    try:
        results = read_results(bundle / layout.RESULTS)
    except (OSError, ValueError):
        return True  # an unreadable results file is the checker's problem, already reported
    return tally_pass(console, flagged(results), sum(1 for r in results if r.status is Status.OK), strict)


def tally_pass(console: Console, by_flag: dict[str, list[str]], ok: int, strict: bool) -> bool:
    """flags_pass from a tally (per flag, the ok results that carry it)."""
    refused = strict and any(by_flag.values())
    console.print(("problem (--strict): " if refused else "") + tally_line(by_flag, ok), highlight=False, markup=False)
    return not refused
