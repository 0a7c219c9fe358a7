"""`deepbench verify`'s answer on the terminal: one row per kernel through the reports' fit-or-fold rule
(runner/render/table_fit.py), so that a kernel id is never cut and a verdict is one line ("disagree [1]",
its reason a footnote under the table, one per distinct reason), then the machine's differences and the
one-line verdict, each wrapped to the terminal's width."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..submission.verify import REPORT_FILE, Comparison, VerifyReport
from .display import print_entry, print_tables
from .tables import Table, fmt_us

REMEASURED = " *"  # after a kernel id: measured again with longer samples
HEADERS = ["kernel", "submitted (us)", "re-run (us)", "ratio", "tolerance", "verdict"]
DROPPABLE = ("ratio", "tolerance")  # a verdict's reason says by how much a kernel differs, and from what


def verify_table(comparisons: list[Comparison]) -> Table:
    """Each kernel's two medians, their ratio, the tolerance it was held to and the verdict with its
    reason ("disagree: differs by 25%, ..."), which the terminal makes a footnote."""
    rows = [
        [
            c.id + (REMEASURED if c.remeasured else ""),
            fmt_us(c.submitted_us),
            fmt_us(c.rerun_us),
            f"{c.ratio:.3f}" if c.ratio else "",
            f"±{c.tolerance:.0%}" if c.tolerance is not None else "",
            c.verdict + (f": {c.reason}" if c.reason else ""),
        ]
        for c in comparisons
    ]
    return Table("verify", "re-run vs submission", HEADERS, rows, DROPPABLE)


def print_verify(console: Console, result: VerifyReport) -> None:
    print_tables(console, [verify_table(result.comparisons)], how_to_see=f"the report in {result.rerun}/{REPORT_FILE}")
    if any(c.remeasured for c in result.comparisons):
        console.print(f"{REMEASURED.strip()} measured again with longer samples; the quieter re-run is compared")
    for d in result.environment_differences:
        print_entry(console, "[yellow]warning[/]", f"this machine differs from the submission's: {d}")
    verified = not result.disagree and not result.unverifiable
    verdict = "[bold green]verified[/]" if verified else "[bold red]not verified[/]"
    console.print(
        f"{verdict}: {result.agree} agree, {result.disagree} disagree, {result.unverifiable} unverifiable "
        f"(tolerance: max({result.rule['floor']:.0%}, {result.rule['noise_factor']:g} x combined relative "
        f"IQR), at most {result.rule['cap']:.0%}; unverifiable above {result.rule['max_noise']:.0%} combined "
        f"relative IQR); report in {escape(result.rerun)}/{REPORT_FILE}",
        highlight=False,
    )
