"""Check a submission bundle: schema versions, the SHA-256 manifest, completeness of the declared
scope (suite + selection, re-derived from the frozen suite), checks passed, enough samples, and
consistency between the results, the run record and the system description.

  deepbench check BUNDLE
  deepbench check BUNDLE --strict     # warnings (e.g. a modified source tree) fail too

Every problem is printed with its reason. Exit status: 0 the bundle passes; 1 it has problems;
2 usage error (no such bundle)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..render.display import make_console
from ..submission.checker import check_bundle
from ..submission.show import print_report

NAME = "check"
HELP = "check a submission bundle; non-zero exit on any problem"
EXIT_PROBLEMS = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, metavar="BUNDLE", help="the folder deepbench submit wrote")
    parser.add_argument("--strict", action="store_true", help="treat warnings as problems")


def run(args: argparse.Namespace) -> int:
    report = check_bundle(args.bundle)
    return 0 if print_report(make_console(), report, strict=args.strict) else EXIT_PROBLEMS
