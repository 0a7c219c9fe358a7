"""One self-contained HTML page: inline CSS, a table of contents, a few lines of inline JavaScript
that make every table sortable (click a header) and filterable (type in the box above it), and
the charts (runner/render/plots.py) with plotly's bundle embedded once. Nothing is fetched: it opens
offline."""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

from .tables import Table

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1em 1.5em;color:#222}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin-top:1.4em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin:.8em 0 .3em}
table{border-collapse:collapse;font-size:12px;margin:.3em 0}
th,td{border:1px solid #ddd;padding:2px 4px;text-align:right;white-space:nowrap}
th{background:#f2f2f2;cursor:pointer;user-select:none;position:sticky;top:0;white-space:normal;vertical-align:bottom}
th.text,th.wrap{text-align:left}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
td.text{text-align:left;white-space:normal}td.wrap{white-space:normal;min-width:7em;max-width:28em;text-align:left}
tr:nth-child(even) td{background:#fafafa}
.charts{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}
figure.chart{margin:0;max-width:100%}figure.chart figcaption{font-size:.9em;font-weight:600;margin:.2em 0 0 .3em}
.first{display:flex;flex-wrap:wrap;gap:1.2em;align-items:flex-start}.first-tables{flex:1 1 36em;min-width:0}
.note{color:#555;font-size:.9em;margin:.3em 0}.faster{color:#2a7d2a;font-weight:bold}
.slower{color:#c0392b;font-weight:bold}.unclear{color:#8a7a00}.scroll{overflow-x:auto;max-height:80vh}
.warning{background:#fff4ce;border:1px solid #e0c060;padding:.3em .6em;margin:.3em 0}
nav#toc{background:#f6f8fa;border:1px solid #ddd;padding:.3em .7em;margin:.5em 0;font-size:.95em}
nav#toc a{margin-right:1.1em;white-space:nowrap}
.answer{font-size:1.05em;margin:.4em 0}
input.filter{margin:.3em 0;padding:2px 6px;width:24em}span.count{color:#666;font-size:.85em;margin-left:.6em}
"""

# Sort on click: numbers (commas, %, x, units stripped) numerically, blanks last, else text.
# Filter: rows holding every word typed (case ignored); the count of rows shown beside the box.
SCRIPT = """
(function () {
  function key(cell) {
    var t = cell.textContent.trim();
    var n = parseFloat(t.replace(/,/g, '').replace(/[%x]$/, ''));
    return t === '' ? null : (isNaN(n) || !/^[-+]?[\\d.,]+(e[-+]?\\d+)?\\s*[%x]?$/i.test(t) ? t.toLowerCase() : n);
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var asc = !th.classList.contains('asc');
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.classList.remove('asc', 'desc'); });
    th.classList.add(asc ? 'asc' : 'desc');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === y) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      if (typeof x !== typeof y) return (typeof x === 'number' ? -1 : 1);
      return (x < y ? -1 : 1) * (asc ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener('click', function () { sortBy(table, col, th); });
    });
  });
  document.querySelectorAll('input.filter').forEach(function (box) {
    var table = document.getElementById(box.dataset.table);
    var count = document.getElementById(box.dataset.table + '-count');
    box.addEventListener('input', function () {
      var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
      var shown = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var text = row.textContent.toLowerCase();
        var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
        row.style.display = keep ? '' : 'none';
        shown += keep ? 1 : 0;
      });
      count.textContent = shown + ' of ' + table.tBodies[0].rows.length + ' rows';
      follow(box.closest('section'), words);
    });
  });
  // The charts of a filtered table's section follow the filter: a point is kept when every word is
  // in its hover text or its trace's name (the kernel's parameters and precision), the others fade
  // (plotly's selectedpoints); an empty filter shows every point again.
  function follow(section, words) {
    if (!section || typeof Plotly === 'undefined') return;
    section.querySelectorAll('.plotly-graph-div').forEach(function (gd) {
      var kept = 0;
      (gd.data || []).forEach(function (trace, i) {
        var labels = trace.text || trace.hovertext;
        if (!Array.isArray(labels)) return;
        var sel = [];
        labels.forEach(function (label, j) {
          var text = (String(label) + ' ' + (trace.name || '')).toLowerCase().replace(/<br>/g, ' ');
          if (words.every(function (w) { return text.indexOf(w) >= 0; })) sel.push(j);
        });
        kept += sel.length;
        Plotly.restyle(gd, {selectedpoints: [words.length ? sel : null]}, [i]);
      });
      gd.setAttribute('data-points-kept', String(kept));
    });
  }
  document.body.setAttribute('data-sortable-tables', String(document.querySelectorAll('table.sortable').length));
})();
"""

TEXT_COLUMNS = {
    "set",
    "application",
    "prec",
    "status",
    "check",
    "cell",
    "verdict",
    "note",
    "fact",
    "value",
    "source",
    "op",
    "fastest",
    "a_t",
    "b_t",
    "kernel",
    "directions",
    "bound",
    "library",
    "closest",
    "furthest",
    "side",
    "baseline",
    "against",
    "answer",
}
WRAP_COLUMNS = {"notes", "flags", "note", "value", "answer", "above"}
FILTER_MIN_ROWS = 8  # tables shorter than this need no filter box
VERDICT_CELL = re.compile(r"^(?:[\d,.]+x (faster|slower)|(unclear) \()")


@dataclass(frozen=True)
class Section:
    """A part of the page with its own entry in the table of contents."""

    anchor: str
    title: str
    html: str


def _cell_class(header: str, text: str) -> str:
    """A column of words (its header's first or last word names one: "closest kernel", "H100 prec") is text:
    left, and wrapping at its spaces where the page is narrow, so that a table never scrolls sideways to
    cut a kernel's parameters; numbers stay on one line."""
    words = header.lower().split(" ")
    first, last = words[0], words[-1]
    text_column = first in TEXT_COLUMNS or last in TEXT_COLUMNS
    cls = ["wrap" if first in WRAP_COLUMNS or " vs " in header else "text" if text_column else ""]
    verdict = VERDICT_CELL.match(text)
    if verdict:  # "6.30x faster", "unclear (1.08x slower?)" (runner/analysis/compare.py phrase)
        cls.append(verdict.group(1) or verdict.group(2))
    cls = [c for c in cls if c]
    return f' class="{" ".join(cls)}"' if cls else ""


def _header(h: str) -> str:
    """A header that may break after its underscores and slashes (stride_w, ratio H100/DeepBench V100), so
    that narrow numbers keep narrow columns."""
    return escape(h).replace("_", "_<wbr>").replace("/", "/<wbr>")


def table_html(headers: list[str], rows: list[list[str]], table_id: str) -> str:
    head = "".join(f"<th{_cell_class(h, '')}>{_header(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td{_cell_class(h, str(c))}>{escape(str(c))}</td>" for h, c in zip(headers, row, strict=False))
        + "</tr>"
        for row in rows
    )
    filter_box = ""
    if len(rows) >= FILTER_MIN_ROWS:
        filter_box = (
            f'<input class="filter" type="search" placeholder="filter rows: words, e.g. fp16 7000" '
            f'data-table="{escape(table_id)}" aria-label="filter {escape(table_id)}">'
            f'<span class="count" id="{escape(table_id)}-count">{len(rows)} rows</span>'
        )
    return (
        f'{filter_box}<div class="scroll"><table class="sortable" id="{escape(table_id)}"><thead><tr>{head}</tr>'
        f"</thead><tbody>{body}</tbody></table></div>"
    )


def table_section(
    t: Table, table_id: str, charts: list[str] | None = None, note: str = "", anchor: str | None = None
) -> Section:
    parts = []
    if note:
        parts.append(f'<p class="note">{escape(note)}</p>')
    if charts:
        parts.append('<div class="charts">' + "".join(charts) + "</div>")
    parts.append(table_html(t.headers, t.rows, table_id))
    return Section(anchor or f"sec-{table_id}", t.title, "\n".join(parts))


# plotly.js's basic partial bundle (scatter, bar, pie: every trace the reports draw), 1.2 MB against
# the full bundle's 4.8 MB; its version is the installed plotly's own (runner/data/plotly/README.md).
# Stored gzip-compressed (0.4 MB): the repository keeps no plain file over 1 MB.
PLOTLY_BUNDLE = Path(__file__).resolve().parent.parent / "data" / "plotly" / "plotly-basic.min.js.gz"
TRACES_IN_BUNDLE = frozenset({"scatter", "bar", "pie"})


def plotly_bundle() -> str:
    """The JavaScript embedded once in a page with charts: the basic bundle."""
    return gzip.decompress(PLOTLY_BUNDLE.read_bytes()).decode("utf-8")


def bundle_version(js: str) -> str:
    """The plotly.js version in a bundle's header comment ('* plotly.js (basic - minified) v4.1.1')."""
    head = js[:300]
    return head.split(" v", 1)[1].split()[0] if " v" in head else ""


def warnings_html(lines: list[str]) -> str:
    return "".join(f'<p class="warning">warning: {escape(w)}</p>' for w in lines)


def page(title: str, sections: list[Section], subtitle: str = "", lead: str = "", charts: bool = False) -> str:
    """The page: title, subtitle, `lead` (raw HTML: the answer, warnings), the table of contents,
    then each section; plotly's bundle once in the head when the page has charts."""
    sub = f'<p class="note">{escape(subtitle)}</p>' if subtitle else ""
    toc = (
        '<nav id="toc"><b>Contents:</b> '
        + " ".join(f'<a href="#{escape(s.anchor)}">{escape(s.title)}</a>' for s in sections)
        + "</nav>"
    )
    body = "\n".join(
        f'<section id="{escape(s.anchor)}"><h2>{escape(s.title)}</h2>\n{s.html}</section>' for s in sections
    )
    bundle = f'<script type="text/javascript">{plotly_bundle()}</script>' if charts else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{CSS}</style>{bundle}</head><body><h1>{escape(title)}</h1>{sub}{lead}{toc}\n{body}"
        f"\n<script>{SCRIPT}</script></body></html>\n"
    )
