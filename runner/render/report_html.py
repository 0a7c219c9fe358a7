"""`deepbench report --format html`: a page that starts with the answer.

The first screen holds the summary (per operation and precision: kernels, geometric-mean throughput, % of
the measured peak, flags, and beside a share over 100% which kernels passed their ceiling and why) next to
a chart of every kernel against its roof; under them the kernels closest to and furthest from the roof
(among those under it) and what each sanity flag means. Then per operation an interactive roofline, the
longest kernels' times and, where the run measured --energy, throughput against power
(runner/render/plots.py) above a table that sorts and filters, then the specs."""

from __future__ import annotations

from collections import Counter
from html import escape

from ..analysis.roofline import no_roof_reason
from ..analysis.sanity import context_of
from ..analysis.sanity import flags as sanity_flags
from ..analysis.sources import Source
from ..analysis.summary import groups, roof_table, summary_line, summary_table
from .html import Section, page, table_html, table_section, warnings_html
from .plots import peak_overview, perf_per_watt, roofline, time_bars
from .report_render import LEGEND, headline, suite_of, tables_of
from .tables import without_empty_columns


def flag_reasons(source: Source) -> list[list[str]]:
    """Each distinct sanity flag reason with how many kernels it concerns."""
    ctx = context_of(source)
    counts = Counter((f.name, f.reason) for e in source.entries for f in sanity_flags(e, ctx))
    return [[name, str(n), reason] for (name, reason), n in counts.most_common()]


def render_html(source: Source) -> str:
    ctx = context_of(source)
    gs = groups(list(source.entries), ctx)
    summary, roof = without_empty_columns(summary_table(gs, explain=True)), roof_table(gs)
    overview = peak_overview(gs, ctx, "overview")
    first = table_html(summary.headers, summary.rows, "table-summary")
    parts = [f'<div class="first"><div class="first-tables">{first}</div>{overview or ""}</div>']
    if roof.rows:
        parts += [f"<h3>{escape(roof.title)}</h3>", table_html(roof.headers, roof.rows, "table-roof")]
    reasons = flag_reasons(source)
    if reasons:
        parts += [
            "<h3>Figures that cannot be true as they stand (flagged in the notes column)</h3>",
            table_html(["flag", "kernels", "answer"], reasons, "table-flags"),
        ]
    note = no_roof_reason(source.ceilings, source.kind)
    if note:
        parts.append(f'<p class="note">Roofline columns are blank: {escape(note)}.</p>')
    sections = [Section("summary", "Summary", "\n".join(parts))]
    for t in tables_of(source):
        entries = [e for e in source.entries if e.kernel.op == t.op]
        charts = [
            c
            for c in (
                roofline(t.op, entries, ctx, f"roof-{t.op}"),
                time_bars(t.op, entries, f"time-{t.op}"),
                perf_per_watt(t.op, entries, f"energy-{t.op}"),
            )
            if c
        ]
        section = table_section(t, f"table-{t.op}", charts, anchor=f"op-{t.op}")
        sections.append(Section(section.anchor, f"{t.title} ({len(t.rows)})", section.html))
    specs = [[k, v] for k, v in source.specs.items()] + [
        [f"measured ceiling {k}", f"{v:,.4g}"] for k, v in source.ceilings.items()
    ]
    sections.append(Section("specs", "Specs", table_html(["fact", "value"], specs, "table-specs")))
    lead = f'<p class="answer">{escape(summary_line(gs, suite_of(source)))}</p>' + warnings_html(list(source.warnings))
    return page(
        f"DeepBench report: {source.label}", sections, subtitle=f"{headline(source)}. {LEGEND}.", lead=lead, charts=True
    )
