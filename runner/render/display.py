"""Terminal output with rich: live progress during a run, tables at the end."""

from __future__ import annotations

import os
import sys
import textwrap
from types import TracebackType
from typing import IO, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
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
MIN_ROOM = 20  # an entry's text gets at least this many columns, however long its label


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


def _left(header: str) -> bool:
    """Words (a kernel id, a verdict) sit left in their column, numbers right."""
    return header.split(" ")[0] in LEFT


def _stacked(texts: list[str], headers: list[str], no_wrap: bool) -> RenderableType:
    """A folded row's cell: one line per band, each justified as its own column is (a count under a
    name's column still sits right), so every value lines up with its header."""
    return Group(
        *(
            Text(text, justify="left" if _left(h) else "right", no_wrap=no_wrap, overflow="fold")
            for text, h in zip(texts, headers, strict=True)
        )
    )


def rich_table(t: Table, layout: Layout) -> RichTable:
    """`t` drawn in `layout`: every column exactly as wide as its widest value (no_wrap, never
    narrowed: fit() chose columns that fit); folded rows stack their bands in each cell."""
    bands = layout.band_columns()
    natural = column_widths(t)
    folded = layout.bands > 1
    rt = RichTable(
        title=t.title,
        title_justify="left",
        header_style="bold",
        box=box.MINIMAL_HEAVY_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0 if layout.compact else 1),
        show_lines=folded,
    )
    # per shown column, the table's column of each band (None where the last band is shorter)
    columns = [[band[i] if i < len(band) else None for band in bands] for i in range(len(bands[0]))]
    for cols in columns:
        present = [c for c in cols if c is not None]
        fixed = any(c in layout.widths for c in present)
        width = max(layout.widths.get(c, natural[c]) for c in present) if fixed else None
        words = any(t.headers[c] in t.wrap for c in present)
        heads = ["" if c is None else t.headers[c] for c in cols]
        # A header may wrap at its spaces; values never wrap, except columns of words (Table.wrap).
        header = _stacked(heads, heads, no_wrap=True) if folded else Text(heads[0], no_wrap=False, overflow="fold")
        rt.add_column(
            header, justify="left" if _left(heads[0]) else "right", no_wrap=not words, overflow="fold", width=width
        )
    for row in t.rows:  # cells are data (reasons hold brackets): Text, never markup
        rt.add_row(
            *(
                _stacked(
                    ["" if c is None else row[c] for c in cols],
                    ["" if c is None else t.headers[c] for c in cols],
                    False,
                )
                if folded
                else Text(row[cols[0] or 0])
                for cols in columns
            )
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
        for n, text in enumerate(notes, 1):  # a footnote's lines after the first hang under its text
            print_entry(console, f"[dim]\\[{n}][/]", text, text_style="dim")
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


def print_entry(console: Console, label: str, text: str, style: str = "", text_style: str = "") -> None:
    """One entry of a list (a warning, a problem, a footnote): `label` (markup) then `text` (data, never
    markup), wrapped at its spaces to the console's width with its lines after the first indented under
    the text's first word, so that each entry still reads as one; piped without COLUMNS it is one line.
    A word wider than the room left (a long path) stays whole."""
    head = Text.from_markup(label, style=style)
    indent = cell_len(head.plain) + 1 if head.plain else 0
    room = max(console.width - indent, MIN_ROOM)
    lines = textwrap.wrap(text, room, break_long_words=False, break_on_hyphens=False) or [""]
    for i, line in enumerate(lines):
        start = (head + " ") if i == 0 and indent else Text(" " * indent)
        console.print(start + Text(line, style=text_style), soft_wrap=True, highlight=False)


def print_noise(console: Console, noise: NoiseRecord | None) -> None:
    """The system-noise verdict of a run (kernels/noise.py): warnings, then pyperf-style notes."""
    if noise is None:
        return
    for text in noise.warnings:
        print_entry(console, "warning:", text, style="yellow", text_style="yellow")
    for text in noise.notes:
        print_entry(console, "note:", text, style="dim", text_style="dim")


# Output to a file or pipe with no COLUMNS set: as wide as the widest table (nothing folds or is
# left out; an editor or `less -S` shows it whole).
PIPE_WIDTH = 1000


def make_console(stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A terminal's own width; elsewhere COLUMNS when set, else PIPE_WIDTH."""
    stream = file or (sys.stderr if stderr else sys.stdout)
    columns = os.environ.get("COLUMNS", "")
    width = None if stream.isatty() else int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
    return Console(stderr=stderr, file=file, width=width)
