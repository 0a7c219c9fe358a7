"""Fit a table (runner.render.tables.Table) into a terminal's width without cutting a value.

rich shrinks columns that do not fit and crops or wraps what is in them (a convolution's
w=480 read "48"); a benchmark that shows a wrong parameter loses its reader. So the layout is
decided here, before rich draws it, from the width of every value:

1. every column, one line per row, cells apart by " │ ";
2. the table's droppable columns left out, the least needed first, until it fits;
3. the same with headers wrapped at their spaces ("DeepBench V100 (us)" over two lines) and
   columns of words (Table.wrap: a summary's flags) at WRAP_WIDTH;
4. steps 1-3 with cells apart by "│" alone;
5. rows folded: the columns still wanted are cut into bands, and each row takes one line per
   band (its second line under the first's columns), so no value is ever narrowed.

Long texts (a failure's reason, a sanity flag's note) are not columns' business: they become
footnotes under the table (`footnoted`), so status columns stay narrow.

By hand because rich has no layout that guarantees "never narrower than the widest value":
its min_width yields when the table is wider than the console.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from rich.cells import cell_len

from .tables import Table

GAP = {False: 3, True: 1}  # " │ " between cells, or "│" alone (compact)
MAX_BANDS = 6
WRAP_WIDTH = 24  # a column of words wraps at this width when the table does not fit
# Cells of these columns longer than this become a footnote reference: "failed [1]".
FOOTNOTE_COLUMNS = ("status", "notes", "note", "verdict")
VERDICT_COLUMNS = ("status", "verdict")  # "failed: reason" -> "failed [1]"
FOOTNOTE_AT = 20


@dataclass(frozen=True)
class Layout:
    columns: tuple[int, ...]  # indices of the columns shown, in order
    dropped: tuple[str, ...] = ()  # droppable columns left out to fit (empty ones are not named)
    compact: bool = False
    bands: int = 1  # lines per row: 1, or more when rows fold
    widths: dict[int, int] = field(default_factory=dict)  # fixed widths: wrapped headers and columns of words

    def band_columns(self) -> list[tuple[int, ...]]:
        per = math.ceil(len(self.columns) / self.bands)
        return [self.columns[i : i + per] for i in range(0, len(self.columns), per)]


def column_widths(t: Table) -> list[int]:
    """The widest of each column's header and values (terminal cells, not characters)."""
    return [max([cell_len(h)] + [cell_len(r[i]) for r in t.rows]) for i, h in enumerate(t.headers)]


def table_width(widths: list[int], columns: tuple[int, ...], compact: bool, bands: int = 1) -> int:
    layout = Layout(columns, compact=compact, bands=bands)
    per_band = layout.band_columns()
    stacked = [max(widths[band[i]] for band in per_band if i < len(band)) for i in range(len(per_band[0]))]
    return sum(stacked) + GAP[compact] * (len(stacked) - 1)


def match_columns(t: Table, names: list[str]) -> set[str]:
    """The headers the user named with --columns (case and units ignored: "time" is "time (us)")."""

    def norm(text: str) -> str:
        return "".join(c for c in text.lower().split("(")[0] if c.isalnum())

    out = set()
    for h in t.headers:
        if any(norm(n) in (norm(h), "".join(c for c in h.lower() if c.isalnum())) for n in names):
            out.add(h)
    return out


def fit(t: Table, width: int, wanted: set[str] | None = None) -> Layout:
    """The layout of `t` in `width` cells. `wanted`: droppable columns the user asked for (kept,
    folding rows if need be); None: drop as needed. Columns empty in every row are left out."""
    natural = column_widths(t)
    capped = [
        max([max(map(cell_len, t.headers[i].split(" ")))] + [cell_len(r[i]) for r in t.rows])
        if t.headers[i] not in t.wrap
        else min(w, max(WRAP_WIDTH, *map(cell_len, t.headers[i].split(" "))))
        for i, w in enumerate(natural)
    ]
    wrapped = {i: w for i, w in enumerate(capped) if w < natural[i]}
    empty = {i for i in range(len(t.headers)) if t.rows and not any(r[i] for r in t.rows)}
    drop_order = [h for h in t.droppable if h in t.headers]
    if wanted is not None:  # the user's choice: the droppable columns not named are left out
        keep = {i for i, h in enumerate(t.headers) if h not in t.droppable or h in wanted}
        base = tuple(i for i in range(len(t.headers)) if i in keep and (i not in empty or t.headers[i] in wanted))
        dropped = tuple(h for h in drop_order if h not in wanted and t.headers.index(h) not in empty)
        drop_order = []
    else:
        base = tuple(i for i in range(len(t.headers)) if i not in empty)
        dropped = ()
    for compact in (False, True):
        for widths, wraps in ((natural, {}), (capped, wrapped)):
            shown = list(base)
            gone: list[str] = []
            for h in [None, *drop_order]:
                if h is not None:
                    i = t.headers.index(h)
                    if i not in shown:
                        continue
                    shown.remove(i)
                    gone.append(h)
                if table_width(widths, tuple(shown), compact) <= width:
                    return Layout(tuple(shown), dropped + tuple(gone), compact, 1, wraps)
    # Folded rows stack several headers in a cell: those stay whole, so that the lines of a cell
    # match the lines of its header; only columns of words keep wrapping.
    words = {i: w for i, w in wrapped.items() if t.headers[i] in t.wrap}
    folded = [words.get(i, w) for i, w in enumerate(natural)]
    shown_t = tuple(shown)
    bands = next((b for b in range(2, MAX_BANDS + 1) if table_width(folded, shown_t, True, b) <= width), MAX_BANDS)
    return Layout(shown_t, dropped + tuple(gone), True, bands, words)  # beyond MAX_BANDS: wider, never cut


@dataclass
class Footnotes:
    texts: list[str] = field(default_factory=list)

    def ref(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"


def footnoted(t: Table) -> tuple[Table, list[str]]:
    """`t` with long status reasons and notes replaced by references ("failed [1]"), and the
    footnotes' texts in order."""
    notes = Footnotes()
    cols = [i for i, h in enumerate(t.headers) if h.split(" ")[0] in FOOTNOTE_COLUMNS]
    rows = []
    for row in t.rows:
        row = list(row)
        for i in cols:
            text = row[i]
            if len(text) <= FOOTNOTE_AT:
                continue
            head, sep, rest = text.partition(": ")
            if t.headers[i].startswith(VERDICT_COLUMNS) and sep:  # "failed: reason" -> "failed [1]"
                row[i] = f"{head} {notes.ref(rest)}"
            else:
                row[i] = "".join(notes.ref(part) for part in text.split("; "))
        rows.append(row)
    return replace(t, rows=rows), notes.texts
