"""Interactive charts for the HTML reports, drawn with plotly.

Why plotly: a train run has 600 kernels, and no static chart shows 600 labels; an interactive
one shows each kernel on hover, zooms, and hides a precision by a click on its legend. plotly
draws that from Python data with no server, and its JavaScript bundle (plotly.offline, ~4.8 MB)
is embedded once in the page (html.page), so the file opens offline and nothing is fetched.
Each chart here is a <div> with the call that draws it (`Figure.to_html`, without the bundle).

Axes: the roofline is log-log by definition (intensity and throughput span decades); times
that are compared with each other sit on linear axes from zero, so 427 us against 514 us looks
like what it is; a chart of hundreds of kernels shows the TOP_N that take the longest and says so
(the table below it holds all of them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

import plotly.graph_objects as go

from deepbench.kernels.catalog import traits_of
from deepbench.kernels.op_traits import Rate

from ..analysis.roofline import Roof, bandwidth, compute_peak, intensity, roof
from ..analysis.sanity import ABOVE_PEAK, PEAK_PCT, Context
from ..analysis.sanity import flags as sanity_flags
from ..analysis.sources import Entry, precision_order
from ..analysis.summary import Group

WIDTH = 660
HEIGHT = 460
TOP_N = 25
BAR_PX = 18  # height per bar of a bar chart
ROOF_POINTS = 64
HEADROOM = 1.6
COLORS = {
    "fp32": "#1f77b4",
    "tf32": "#17becf",
    "fp16": "#ff7f0e",
    "bf16": "#d62728",
    "int8": "#2ca02c",
    "fp8": "#9467bd",
}
VERDICT_COLORS = {"faster": "#2ca02c", "slower": "#d62728", "same": "#7f7f7f", "unclear": "#bcbd22"}
CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
TEMPLATE = "plotly_white"
TOOLBAR_PX = 28  # the chart's top margin: plotly's toolbar sits there, over nothing
OVERVIEW_WIDTH = 560
OVERVIEW_PX, ROW_PX, OVERVIEW_MIN_PX = 150, 34, 300  # the overview's height: frame, per operation and precision, least
OVERVIEW_MARGIN = 1.5  # the overview's axis reaches this factor past its lowest and highest share
OVERVIEW_LEGEND_Y = -0.25  # its legend under the axis
ABOVE_COLOR = "#b22222"


def div(fig: go.Figure, div_id: str) -> str:
    """The chart as a <figure>: its title a caption above it, in the page's own text (plotly's toolbar
    covers a title drawn inside the chart, and a caption wraps where a plotly title runs out of the
    frame), then the <div> and the script that draws it (the bundle is in the page once)."""
    title = fig.layout.title.text or ""
    fig.update_layout(
        template=TEMPLATE,
        title=None,
        margin={"l": 60, "r": 20, "t": TOOLBAR_PX, "b": 50},
        hovermode="closest",
        font={"size": 11},
        legend={"font": {"size": 10}},
    )
    chart = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config=CONFIG,
        default_width=f"{fig.layout.width or WIDTH}px",
        default_height=f"{fig.layout.height or HEIGHT}px",
    )
    caption = "<br>".join(escape(part) for part in title.split("<br>"))
    width = fig.layout.width or WIDTH
    return f'<figure class="chart" style="width:{width}px"><figcaption>{caption}</figcaption>{chart}</figure>'


def short_label(e: Entry) -> str:
    """The kernel's parameters' values and its precision (the axis title names the fields)."""
    return (
        " ".join(("T" if v else "N") if isinstance(v, bool) else str(v) for v in e.kernel.params().values())
        + f" {e.precision}"
    )


def hover(e: Entry) -> str:
    app = e.kernel.application or e.extra.get("application", "")
    return f"{e.kernel.label()} {e.precision}" + (f"<br>{app}" if app else "")


def roofline(op: str, entries: list[Entry], ctx: Context, div_id: str) -> str | None:
    """Each kernel a point (FLOPs per fewest byte, achieved TFLOP/s), hover names it; the measured
    roof per precision (the copy bandwidth's slope up to the ridge, then the compute peak)."""
    points = [e for e in entries if e.ok and e.tflops and intensity(e)]
    if not points:
        return None
    fig = go.Figure()
    xs_all = [intensity(e) or 0 for e in points]
    lo, hi = min(xs_all) / 2, max(xs_all) * 2
    bw = bandwidth(ctx.ceilings)
    precisions = sorted({e.precision for e in points}, key=precision_order)
    for prec in precisions:
        es = [e for e in points if e.precision == prec]
        pcts = [roof(e, ctx.ceilings) for e in es]
        flagged = [bool(sanity_flags(e, ctx)) for e in es]
        fig.add_trace(
            go.Scatter(
                x=[intensity(e) for e in es],
                y=[e.tflops for e in es],
                mode="markers",
                name=f"{prec} kernels",
                marker={
                    "color": COLORS.get(prec),
                    "size": 7,
                    "opacity": 0.75,
                    "symbol": ["x" if f else "circle" for f in flagged],
                },
                text=[hover(e) for e in es],
                customdata=[
                    [e.median_us, "" if r is None else f"{r.pct_of_peak:.0f}% of the {r.bound} roof"]
                    for e, r in zip(es, pcts, strict=False)
                ],
                hovertemplate="%{text}<br>%{y:.3g} TFLOP/s, %{customdata[0]:,.1f} us<br>%{customdata[1]}"
                "<extra></extra>",
            )
        )
        peak = compute_peak(ctx.ceilings, prec)
        if peak:
            xs = [lo * (hi / lo) ** (i / ROOF_POINTS) for i in range(ROOF_POINTS + 1)]
            ys = [min(peak, x * bw / 1e3) if bw else peak for x in xs]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line={"color": COLORS.get(prec, "#000"), "dash": "dash"},
                    name=f"{prec} roof: {peak:,.3g} TFLOP/s" + (f", {bw:,.0f} GB/s" if bw else ""),
                    hoverinfo="name",
                )
            )
    peaks = [compute_peak(ctx.ceilings, p) or 0 for p in precisions]
    top = max([e.tflops or 0 for e in points] + peaks) * HEADROOM
    bottom = min(e.tflops or top for e in points) / 2
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOPs per fewest byte)", range=_log_range(lo, hi))
    fig.update_yaxes(type="log", title="achieved TFLOP/s", range=_log_range(bottom, top))
    roofs = "measured roof dashed, x: flagged (see notes)" if any(peaks) else "no measured ceilings in this source"
    fig.update_layout(title=f"{op}: roofline of {len(points)} kernels ({roofs})", width=WIDTH, height=HEIGHT)
    return div(fig, div_id)


def peak_overview(groups: Sequence[Group], ctx: Context, div_id: str) -> str | None:
    """The report's first chart: every kernel's share of its measured ceiling, one row per operation and
    precision, on a log axis through the roof (100%, the dashed line); the kernels past it drawn apart,
    hover saying why (their above-peak flag). None where no kernel has a ceiling to be held against."""
    rows = [
        (f"{g.op} {g.precision}", [(e, r) for e in g.entries if e.ok for r in [roof(e, ctx.ceilings)] if r])
        for g in groups
    ]
    rows = [(label, pts) for label, pts in rows if pts]
    if not rows:
        return None
    points = [(label, e, r) for label, pts in rows for e, r in pts]
    fig = go.Figure()
    for past in (False, True):
        shown = [p for p in points if (p[2].pct_of_peak > PEAK_PCT) == past]
        if shown:
            fig.add_trace(_overview_trace(shown, past, ctx))
    xs = [r.pct_of_peak for _, _, r in points]
    fig.add_vline(x=PEAK_PCT, line={"color": "#444", "width": 1, "dash": "dash"})
    fig.update_xaxes(
        type="log",
        title="% of the measured peak (the dashed roof: 100%)",
        range=_log_range(min(xs) / OVERVIEW_MARGIN, max(*xs, PEAK_PCT) * OVERVIEW_MARGIN),
    )
    fig.update_yaxes(categoryorder="array", categoryarray=[label for label, _ in rows][::-1], automargin=True)
    fig.update_layout(
        title=f"Every kernel against its roof ({len(points)} kernels with a measured ceiling)",
        width=OVERVIEW_WIDTH,
        height=max(OVERVIEW_MIN_PX, OVERVIEW_PX + ROW_PX * len(rows)),
        showlegend=True,
        legend={"orientation": "h", "y": OVERVIEW_LEGEND_Y},
    )
    return div(fig, div_id)


def _overview_trace(points: list[tuple[str, Entry, Roof]], past: bool, ctx: Context) -> go.Scatter:
    """The overview's kernels under their roof (coloured by precision), or past it (x, hover: the reason)."""

    def why(e: Entry) -> str:
        return "; ".join(f.reason for f in sanity_flags(e, ctx) if f.name == ABOVE_PEAK) if past else ""

    return go.Scatter(
        x=[r.pct_of_peak for _, _, r in points],
        y=[label for label, _, _ in points],
        mode="markers",
        name="past the roof: hover says why" if past else "kernels at or under the roof",
        marker={
            "color": ABOVE_COLOR if past else [COLORS.get(e.precision, "#555") for _, e, _ in points],
            "symbol": "x" if past else "circle",
            "size": 7,
            "opacity": 0.7,
        },
        text=[hover(e) for _, e, _ in points],
        customdata=[[r.bound, why(e)] for _, e, r in points],
        hovertemplate="%{text}<br>%{x:.3g}% of the %{customdata[0]} roof<br>%{customdata[1]}<extra></extra>",
    )


def perf_per_watt(op: str, entries: list[Entry], div_id: str) -> str | None:
    """--energy: each kernel's throughput against its average power, coloured by precision; hover
    gives its work per joule and energy per call. None where no kernel measured energy, so a run
    without --energy draws no empty chart. Both axes from zero: a kernel twice as efficient sits on
    a line twice as steep through the origin."""
    gbps = traits_of(op).rated_in is Rate.GBPS
    rate, per_j, unit = ("gbps", "gb_per_j", "GB") if gbps else ("tflops", "gflops_per_j", "GFLOP")
    points = [e for e in entries if e.ok and e.extra.get("watts") and getattr(e, rate) and e.extra.get(per_j)]
    if not points:
        return None
    fig = go.Figure()
    for prec in sorted({e.precision for e in points}, key=precision_order):
        es = [e for e in points if e.precision == prec]
        fig.add_trace(
            go.Scatter(
                x=[e.extra["watts"] for e in es],
                y=[getattr(e, rate) for e in es],
                mode="markers",
                name=prec,
                marker={"color": COLORS.get(prec), "size": 7},
                hovertext=[
                    f"{hover(e)}<br>{e.extra[per_j]:,.3g} {unit}/J, {e.extra['joules_per_call']:.3g} J/call" for e in es
                ],
                hovertemplate="%{hovertext}<br>%{x:,.0f} W, %{y:,.3g}<extra></extra>",
            )
        )
    fig.update_xaxes(title="average power while looping (W)", rangemode="tozero")
    fig.update_yaxes(title="GB/s" if gbps else "TFLOP/s", rangemode="tozero")
    fig.update_layout(
        title=f"{op}: throughput against power ({len(points)} kernels; steeper is more {unit}/J)",
        width=WIDTH,
        height=HEIGHT,
        showlegend=True,
    )
    return div(fig, div_id)


def _log_range(lo: float, hi: float) -> list[float]:
    return [math.log10(lo), math.log10(hi)]


def time_bars(op: str, entries: list[Entry], div_id: str, top_n: int = TOP_N) -> str | None:
    """The TOP_N longest kernels' median time per call on a linear axis from zero (error bars:
    p25-p75), coloured by precision; hover names the kernel."""
    ok = sorted((e for e in entries if e.ok and e.median_us), key=lambda e: e.median_us or 0, reverse=True)
    if not ok:
        return None
    shown = ok[:top_n]
    fig = go.Figure()
    for prec in dict.fromkeys(e.precision for e in shown):
        es = [e for e in shown if e.precision == prec]
        fig.add_trace(
            go.Bar(
                y=[short_label(e) for e in es],
                x=[e.median_us for e in es],
                orientation="h",
                name=prec,
                marker={"color": COLORS.get(prec)},
                hovertext=[hover(e) for e in es],
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "thickness": 1,
                    "array": [max(0.0, (e.p75_us or e.median_us or 0) - (e.median_us or 0)) for e in es],
                    "arrayminus": [max(0.0, (e.median_us or 0) - (e.p25_us or e.median_us or 0)) for e in es],
                },
                hovertemplate="%{hovertext}<br>median %{x:,.1f} us<extra></extra>",
            )
        )
    what = f"the {len(shown)} longest of {len(ok)} kernels" if len(ok) > len(shown) else f"{len(ok)} kernels"
    fields = " ".join(shown[0].kernel.params())
    fig.update_yaxes(
        categoryorder="array",
        categoryarray=[short_label(e) for e in shown][::-1],
        tickfont={"size": 9},
        automargin=True,
        title=f"{fields} prec",
    )
    fig.update_xaxes(title="median time per call (us), p25-p75 bars", rangemode="tozero")
    fig.update_layout(
        title=f"{op}: time of {what}",
        width=WIDTH,
        height=max(HEIGHT, 120 + BAR_PX * len(shown)),
        barmode="overlay",
        showlegend=True,
    )
    return div(fig, div_id)


def speedups(
    title: str,
    labels: Sequence[str],
    base_us: Sequence[float],
    ratios: Sequence[float],
    verdicts: Sequence[str],
    phrases: Sequence[str],
    other: str,
    base: str,
    div_id: str,
) -> str | None:
    """Per kernel the speedup of `other` over the baseline (baseline time / other time; log
    axis, so twice as fast and twice as slow lie as far from 1), against the baseline's time."""
    if not ratios:
        return None
    fig = go.Figure()
    for verdict in dict.fromkeys(verdicts):
        idx = [i for i, v in enumerate(verdicts) if v == verdict]
        fig.add_trace(
            go.Scatter(
                x=[base_us[i] for i in idx],
                y=[1 / ratios[i] for i in idx],
                mode="markers",
                name=verdict,
                marker={"color": VERDICT_COLORS.get(verdict, "#888"), "size": 7, "opacity": 0.8},
                text=[labels[i] for i in idx],
                customdata=[[base_us[i] * ratios[i], phrases[i]] for i in idx],
                hovertemplate=(
                    f"%{{text}}<br>{base} %{{x:,.1f}} us, {other} %{{customdata[0]:,.1f}} us"
                    f"<br>{other} vs {base}: %{{customdata[1]}}<extra></extra>"
                ),
            )
        )
    fig.add_hline(y=1, line={"color": "#444", "width": 1})
    fig.update_xaxes(type="log", title=f"{base} (baseline) median time (us)")
    fig.update_yaxes(type="log", title=f"speedup of {other} (baseline time / its time)")
    fig.update_layout(title={"text": title, "font": {"size": 12}}, width=WIDTH, height=HEIGHT)
    return div(fig, div_id)


def grouped_bars(
    title: str, groups: Sequence[str], series: Mapping[str, Sequence[float]], axis: str, div_id: str
) -> str:
    """Counts side by side per group (e.g. kernels each source ran fastest, per operation)."""
    fig = go.Figure([go.Bar(x=list(groups), y=list(values), name=name) for name, values in series.items()])
    fig.update_yaxes(title=axis, rangemode="tozero")
    fig.update_layout(title=title, barmode="group", width=WIDTH, height=HEIGHT - 60)
    return div(fig, div_id)
