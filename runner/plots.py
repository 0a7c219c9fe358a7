"""Charts for the HTML report, drawn with matplotlib into SVG text that is inlined in the page
(no files beside it, nothing fetched: the report opens offline). matplotlib rather than
hand-written SVG because log axes, ticks and legends are what it does well."""

from __future__ import annotations

import io
import math
import re

import matplotlib

matplotlib.use("Agg")  # no display: render to SVG only
import matplotlib.pyplot as plt  # noqa: E402

from .roofline import bandwidth, compute_peak, intensity  # noqa: E402
from .sources import Entry  # noqa: E402

WIDTH_IN = 7.5
BAR_HEIGHT_IN = 0.16
MAX_BAR_LABEL = 48
HEADROOM = 1.6
ROOF_POINTS = 64  # points along the roof line (log-spaced)
COLORS = {"fp32": "#1f77b4", "tf32": "#17becf", "fp16": "#ff7f0e", "bf16": "#d62728", "int8": "#2ca02c",
          "fp8": "#9467bd"}
METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)  # RDF boilerplate: nothing a reader needs
VERDICT_COLORS = {"faster": "#2ca02c", "slower": "#d62728", "same": "#7f7f7f", "unclear": "#bcbd22"}


def _svg(fig, salt: str) -> str:
    """The figure as inline SVG: no XML prolog, ids made unique per chart by the hash salt."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return METADATA.sub("", text[text.index("<svg"):])


def label(e: Entry) -> str:
    text = e.kernel.label()
    return text if len(text) <= MAX_BAR_LABEL else text[: MAX_BAR_LABEL - 1] + "…"


def roofline_svg(op: str, entries: list[Entry], ceilings: dict[str, float], salt: str) -> str | None:
    """Each kernel a point (FLOPs per fewest byte, achieved TFLOP/s); the measured ceilings as
    lines (compute peak per precision, the copy bandwidth's slope)."""
    points = [(intensity(e), e.tflops, e.precision) for e in entries if e.ok and e.tflops and intensity(e)]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.2))
    for prec in sorted({p for _, _, p in points}):
        xs = [x for x, _, p in points if p == prec]
        ys = [y for _, y, p in points if p == prec]
        ax.scatter(xs, ys, s=18, label=f"{prec} kernels", color=COLORS.get(prec), alpha=0.8)
    xs_all = [x for x, _, _ in points]
    lo, hi = min(xs_all) / 2, max(xs_all) * 2
    bw = bandwidth(ceilings)
    drew = False
    xs = [lo * (hi / lo) ** (i / ROOF_POINTS) for i in range(ROOF_POINTS + 1)]
    for prec in sorted({p for _, _, p in points}):
        peak = compute_peak(ceilings, prec)
        if peak and bw:  # the roof: bandwidth slope up to the ridge point, then the compute peak
            ax.plot(xs, [min(peak, x * bw / 1e3) for x in xs], color=COLORS.get(prec, "k"), linestyle="--",
                    linewidth=1, label=f"{prec} roof: {peak:,.0f} TFLOP/s, {bw:,.0f} GB/s (measured)")
        elif peak:
            ax.axhline(peak, color=COLORS.get(prec, "k"), linestyle="--", linewidth=1,
                       label=f"measured {prec} peak {peak:,.0f} TFLOP/s")
        drew = drew or bool(peak)
    if bw and not drew:
        ax.plot([lo, hi], [lo * bw / 1e3, hi * bw / 1e3], color="k", linestyle=":", linewidth=1,
                label=f"measured copy bandwidth {bw:,.0f} GB/s")
        drew = True
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    peaks = [compute_peak(ceilings, p) or 0 for p in {p for _, _, p in points}]
    if max(peaks, default=0):
        ax.set_ylim(top=max(ax.get_ylim()[1], max(peaks) * HEADROOM))  # the roof stays inside the frame
    ax.set_xlabel("arithmetic intensity (FLOPs per fewest byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{op}: roofline" + ("" if drew else " (no measured ceilings in this source)"))
    ax.grid(True, which="both", linewidth=0.3)
    ax.legend(fontsize=7, loc="best")
    return _svg(fig, salt)


def time_bars_svg(op: str, entries: list[Entry], salt: str) -> str | None:
    """Median time per kernel (log scale) with the p25-p75 range as the error bar."""
    rows = [e for e in entries if e.ok]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.9 + BAR_HEIGHT_IN * len(rows)))
    ys = list(range(len(rows)))
    med = [e.median_us for e in rows]
    err = [[max(0.0, e.median_us - (e.p25_us or e.median_us)) for e in rows],
           [max(0.0, (e.p75_us or e.median_us) - e.median_us) for e in rows]]
    ax.barh(ys, med, xerr=err, color=[COLORS.get(e.precision, "#888") for e in rows], height=0.7,
            error_kw={"elinewidth": 0.6, "capsize": 1.5})
    ax.set_yticks(ys, [f"{label(e)} {e.precision}" for e in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("median time per call (us); bars: p25-p75")
    ax.set_title(f"{op}: time per kernel")
    ax.grid(True, axis="x", which="both", linewidth=0.3)
    return _svg(fig, salt)


def ratio_bars_svg(title: str, labels: list[str], ratios: list[float], verdicts: list[str], salt: str) -> str | None:
    """Time ratio per kernel (log scale, 1 = same), coloured by verdict."""
    if not ratios:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.9 + BAR_HEIGHT_IN * len(ratios)))
    ys = list(range(len(ratios)))
    ax.barh(ys, [math.log2(r) for r in ratios], color=[VERDICT_COLORS.get(v, "#888") for v in verdicts], height=0.7)
    ax.axvline(0, color="k", linewidth=0.8)
    ax.set_yticks(ys, labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("log2(time / baseline time): left = faster, right = slower")
    ax.set_title(title)
    ax.grid(True, axis="x", linewidth=0.3)
    return _svg(fig, salt)


def svg_ok(text: str) -> bool:
    return bool(re.match(r"<svg[\s>]", text))
