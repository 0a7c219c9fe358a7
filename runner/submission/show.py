"""Printing a check report: every problem as one entry (its lines after the first indented under it on a
narrow terminal), the same message for several files or kernels once with all of them, then a one-line
verdict."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..render.display import print_entry
from .check_report import Problem, Report

# A message shared by more kernels than this names the first ones and counts the rest.
NAMED_AT_MOST = 8


def grouped(problems: list[Problem]) -> list[str]:
    """Each distinct message once, after every place it concerns, in the order first seen ("a, b: contended:
    ..."): a contended CPU run's 600 kernels make one entry, not 600."""
    where: dict[str, list[str]] = {}
    for p in problems:
        where.setdefault(p.message, []).append(p.where)
    out = []
    for message, places in where.items():
        shown = ", ".join(places[:NAMED_AT_MOST])
        more = f" and {len(places) - NAMED_AT_MOST} more" if len(places) > NAMED_AT_MOST else ""
        out.append(f"{shown}{more}: {message}")
    return out


def print_report(console: Console, report: Report, strict: bool = False) -> bool:
    """Print the report; True when the bundle passes (with --strict, warnings fail it too)."""
    b = report.bundle
    for text in grouped(report.problems):
        print_entry(console, "[red]PROBLEM[/]", text)
    for text in grouped(report.warnings):
        print_entry(console, "[red]PROBLEM[/] (strict)" if strict else "[yellow]warning[/]", text)
    failed = bool(report.problems) or (strict and bool(report.warnings))
    if failed:
        n = len(report.problems) + (len(report.warnings) if strict else 0)
        console.print(f"[bold red]check failed[/]: {n} problem(s) in {escape(str(report.root))}", highlight=False)
        return False
    tally = b.run.counts if b.run else {}  # equal to results.jsonl's (checked)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
    console.print(
        f"[bold green]check passed[/]: {escape(str(report.root))}: suite {b.plan.suite if b.plan else '?'}, "
        f"{sum(tally.values())} results ({counts}), {report.files} files match the manifest",
        highlight=False,
    )
    return True
