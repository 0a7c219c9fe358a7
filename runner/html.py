"""One self-contained HTML page: inline CSS, a few lines of inline JavaScript that make every
table sortable (click a header), charts as inline SVG. Nothing is fetched: it opens offline."""

from __future__ import annotations

from html import escape

from .tables import Table

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222;max-width:1600px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f2f2f2;cursor:pointer;user-select:none;position:sticky;top:0}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
td.text{text-align:left}tr:nth-child(even) td{background:#fafafa}
.charts{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}.charts svg{max-width:100%;height:auto}
.note{color:#666;font-size:.9em}.faster{color:#2a7d2a;font-weight:bold}.slower{color:#c0392b;font-weight:bold}
.unclear{color:#8a7a00}.scroll{overflow-x:auto}
"""

# Sort on click: numbers (commas, %, units stripped) numerically, blanks last, else text.
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
  document.body.setAttribute('data-sortable-tables', String(document.querySelectorAll('table.sortable').length));
})();
"""

TEXT_COLUMNS = {"set", "application", "prec", "status", "check", "cell", "verdict", "note", "fact", "value", "source",
                "op", "fastest", "a_t", "b_t", "kernel", "directions"}


def table_html(headers: list[str], rows: list[list[str]], table_id: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for h, c in zip(headers, row):
            cls = [h.split(" ")[0].lower() in TEXT_COLUMNS and "text" or ""]
            if h.startswith("verdict") and c in ("faster", "slower", "unclear"):
                cls.append(c)
            attr = f' class="{" ".join(x for x in cls if x)}"' if any(cls) else ""
            cells.append(f"<td{attr}>{escape(str(c))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="scroll"><table class="sortable" id="{escape(table_id)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def table_section(t: Table, table_id: str, charts: list[str] | None = None, note: str = "") -> str:
    parts = [f"<h2>{escape(t.title)}</h2>"]
    if note:
        parts.append(f'<p class="note">{escape(note)}</p>')
    if charts:
        parts.append('<div class="charts">' + "".join(f'<figure>{c}</figure>' for c in charts) + "</div>")
    parts.append(table_html(t.headers, t.rows, table_id))
    return "\n".join(parts)


def page(title: str, sections: list[str], subtitle: str = "") -> str:
    sub = f'<p class="note">{escape(subtitle)}</p>' if subtitle else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>{sub}\n" + "\n".join(sections)
            + f"\n<script>{SCRIPT}</script></body></html>\n")
