"""Terminal output with rich: live progress during a run, tables at the end."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from ..kernels.results import KernelResult
from .tables import Table, fmt_us

STATUS_STYLE = {"ok": "green", "unsupported": "yellow", "failed": "red", "timeout": "red"}


def print_tables(console: Console, tables: list[Table]) -> None:
    """One table per operation; status marks: ~ unconverged (hit the time cap), ± noisy."""
    for t in tables:
        rt = RichTable(title=t.title, title_justify="left", header_style="bold")
        for h in t.headers:
            rt.add_column(h, justify="left" if h in ("set", "prec", "status", "cell") else "right",
                          overflow="fold", no_wrap=h != "status")
        for row in t.rows:
            rt.add_row(*(escape(cell) for cell in row))  # cells are data (reasons hold brackets), not markup
        console.print(rt)
    if tables:
        console.print("[dim]~ unconverged (stopped at the time cap), ± noisy (IQR over 10% of the median)[/]")


class RunProgress:
    """A progress bar with one line per finished kernel."""

    def __init__(self, console: Console, total: int, done: int = 0) -> None:
        self.console = console
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True)
        self.task = self.bar.add_task("starting", total=total, completed=done)

    def __enter__(self) -> "RunProgress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)

    def started(self, event: dict) -> None:
        self.bar.update(self.task, description=str(event.get("id", "")))

    def finished(self, event: dict) -> None:
        status = str(event.get("status", "?"))
        style = STATUS_STYLE.get(status, "white")
        median = event.get("median_us")
        figure = f"{fmt_us(median)} us" if median is not None else str(event.get("reason", ""))[:120]
        # Library messages hold brackets (gloo's "[/path/pair.cc:537]"): never read them as markup.
        self.console.print(f"[{style}]{status:<11}[/] {escape(str(event.get('id', '')))}  {escape(figure)}")
        self.bar.advance(self.task)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}[/]")


def summary_line(results: list[KernelResult]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))

PIPE_WIDTH = 200  # when output goes to a file or pipe, don't wrap tables at 80 columns


def make_console(stderr: bool = False) -> Console:
    import sys

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else PIPE_WIDTH)
