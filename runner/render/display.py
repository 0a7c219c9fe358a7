"""Terminal output with rich: live progress during a run, tables at the end."""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable
from rich.text import Text

from deepbench.kernels.noise import NoiseRecord
from deepbench.kernels.result_flags import NOISY_REL_IQR

from ..errors import UserError
from .table_fit import Layout, column_widths, fit, footnoted, match_columns
from .tables import Table, fmt_us

STATUS_STYLE = {"ok": "green", "unsupported": "yellow", "failed": "red", "timeout": "red"}
LEFT = (
    "set",
    "application",
    "prec",
    "status",
    "cell",
    "library",
    "kernel",
    "source",
    "op",
    "fastest",
    "verdict",
    "check",
    "bound",
    "notes",
    "note",
    "parameters",
    "flags",
    "closest",
    "furthest",
    "baseline",
    "side",
    "comparison",
    "answer",
    "runner-up",
    "type",
    "name",
    "input",
    "definition",
    "shape",
    "id",
    "device",
    "runs",
    "platform",
    "tag",
    "arch",
    "created",
    "base",
    "on",
    "sources",
)
MARKS = (
    f"~ unconverged (stopped at the time cap), ± noisy (IQR over {NOISY_REL_IQR:.0%} of the median), ! throttled, "
    "c contended (other processes held its CPUs), ↓ clock fell while sampled; "
    "times are medians of the samples, IQR their interquartile range over the median"
)
HOW_TO_SEE = "--columns all, or --format md|csv"


def add_columns_argument(parser: Any) -> None:
    parser.add_argument(
        "--columns",
        metavar="NAMES",
        type=lambda text: [n.strip() for n in text.split(",") if n.strip()],
        help="terminal tables: 'all' shows every column (rows fold when they do not fit); "
        "NAME,... adds those columns (e.g. check,IQR) to the ones always shown; "
        "default: what fits the terminal's width",
    )


def check_columns(tables: list[Table], names: list[str] | None) -> None:
    """--columns names that match no column of any table are a usage error that names the choices."""
    if not names or names == ["all"]:
        return
    found = set().union(*(match_columns(t, names) for t in tables)) if tables else set()
    unknown = [n for n in names if not any(match_columns(Table("", "", [h], []), [n]) for h in found)]
    if unknown:
        choices = sorted({h for t in tables for h in t.droppable if h in t.headers})
        raise UserError(f"--columns: no column named {', '.join(unknown)} (choose 'all' or from: {', '.join(choices)})")


def rich_table(t: Table, layout: Layout) -> RichTable:
    """`t` drawn in `layout`: every column exactly as wide as its widest value (no_wrap, never
    narrowed: fit() chose columns that fit); folded rows stack their bands in each cell."""
    bands = layout.band_columns()
    natural = column_widths(t)
    rt = RichTable(
        title=t.title,
        title_justify="left",
        header_style="bold",
        box=box.MINIMAL_HEAVY_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0 if layout.compact else 1),
        show_lines=layout.bands > 1,
    )
    for i in range(len(bands[0])):
        cols = [band[i] for band in bands if i < len(band)]
        left = t.headers[cols[0]].split(" ")[0] in LEFT
        fixed = any(c in layout.widths for c in cols)
        width = max(layout.widths.get(c, natural[c]) for c in cols) if fixed else None
        # A header may wrap at its spaces; values never wrap, except columns of words (Table.wrap).
        header = Text(
            "\n".join(t.headers[band[i]] if i < len(band) else "" for band in bands),
            no_wrap=layout.bands > 1,
            overflow="fold",
        )
        words = any(t.headers[c] in t.wrap for c in cols)
        rt.add_column(header, justify="left" if left else "right", no_wrap=not words, overflow="fold", width=width)
    for row in t.rows:  # cells are data (reasons hold brackets), not markup
        rt.add_row(
            *("\n".join(escape(row[band[i]]) if i < len(band) else "" for band in bands) for i in range(len(bands[0])))
        )
    return rt


def print_tables(
    console: Console, tables: list[Table], columns: list[str] | None = None, how_to_see: str = HOW_TO_SEE
) -> None:
    """One table per operation, fitted to the console's width (runner/render/table_fit.py): numbers and
    parameters are never cut; columns left out are named with how to see them. `columns`: the
    user's --columns (["all"], or names)."""
    for t in tables:
        shown, notes = footnoted(t)
        wanted = None if columns is None else set(t.headers) if columns == ["all"] else match_columns(t, columns)
        layout = fit(shown, console.width, wanted)
        console.print(rich_table(shown, layout))
        for n, text in enumerate(notes, 1):
            console.print(f"[dim]\\[{n}] {escape(text)}[/]")
        if layout.dropped:
            why = f" to fit {console.width} columns" if columns is None else ""
            console.print(
                f"[dim]left out{why}: {escape(', '.join(layout.dropped))} (see them with {escape(how_to_see)})[/]"
            )
        if layout.bands > 1:
            console.print(f"[dim]each row folded onto {layout.bands} lines to fit {console.width} columns[/]")
    if any(t.headers.count("status") for t in tables):
        console.print(f"[dim]{MARKS}[/]")


class RunProgress:
    """A progress bar with one line per finished kernel."""

    def __init__(self, console: Console, total: int, done: int = 0) -> None:
        self.console = console
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.bar.add_task("starting", total=total, completed=done)

    def __enter__(self) -> RunProgress:
        self.bar.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.__exit__(exc_type, exc, tb)

    def started(self, event: dict) -> None:
        self.bar.update(self.task, description=str(event.get("id", "")))

    def finished(self, event: dict) -> None:
        status = str(event.get("status", "?"))
        style = STATUS_STYLE.get(status, "white")
        median = event.get("median_us")
        figure = f"median {fmt_us(median)} us" if median is not None else str(event.get("reason", ""))[:120]
        # Library messages hold brackets (gloo's "[/path/pair.cc:537]"): never read them as markup.
        self.console.print(f"[{style}]{status:<11}[/] {escape(str(event.get('id', '')))}  {escape(figure)}")
        self.bar.advance(self.task)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}[/]")


def print_noise(console: Console, noise: NoiseRecord | None) -> None:
    """The system-noise verdict of a run (kernels/noise.py): warnings, then pyperf-style notes."""
    if noise is None:
        return
    for text in noise.warnings:
        console.print(f"[yellow]warning: {escape(text)}[/]")
    for text in noise.notes:
        console.print(f"[dim]note: {escape(text)}[/]")


# Output to a file or pipe with no COLUMNS set: as wide as the widest table (nothing folds or is
# left out; an editor or `less -S` shows it whole).
PIPE_WIDTH = 1000


def make_console(stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A terminal's own width; elsewhere COLUMNS when set, else PIPE_WIDTH."""
    stream = file or (sys.stderr if stderr else sys.stdout)
    columns = os.environ.get("COLUMNS", "")
    width = None if stream.isatty() else int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
    return Console(stderr=stderr, file=file, width=width)
