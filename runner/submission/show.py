"""Printing a check report: every problem on its own line, then a one-line verdict."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from .checker import Report


def print_report(console: Console, report: Report, strict: bool = False) -> bool:
    """Print the report; True when the bundle passes (with --strict, warnings fail it too)."""
    b = report.bundle
    for p in report.problems:
        console.print(f"[red]PROBLEM[/] {escape(str(p))}", highlight=False, soft_wrap=True)
    for p in report.warnings:
        label = "[red]PROBLEM[/] (strict)" if strict else "[yellow]warning[/]"
        console.print(f"{label} {escape(str(p))}", highlight=False, soft_wrap=True)
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
