"""`deepbench models` tables as data (runner/render/tables.Table), so that they are drawn by the
same fit-or-fold rule as every report (runner/render/table_fit.py) and never cut a number."""

from __future__ import annotations

from ..analysis.model_compare import ModelComparison, PrecisionComparison
from ..analysis.model_report import FORWARD, ModelReport
from .tables import Table

HOW_TO_SEE = "--format json"  # what `deepbench models` offers for the columns a narrow terminal leaves out

PEAK_PCT = 100.0  # a share of a measured ceiling above this cannot be the ceiling's own kind of work
# Why a type can read above the copy bandwidth or the compute peak (the report's sanity flags say the same).
ABOVE_BANDWIDTH = (
    "above the measured copy bandwidth: its data may fit the L2 or last-level cache and stay "
    "there between calls, while the ceiling is a copy from memory"
)
ABOVE_FLOPS = (
    "above the measured compute peak: the ceiling's GEMM ran slower than these shapes (a clock or power "
    "state of that moment, or a faster algorithm here)"
)


def _pct(value: float | None) -> str:
    return f"{value:.1f}%" if value is not None else ""


def ratio_text(value: float | None) -> str:
    return f"{value:.3g}x" if value is not None else "?"


def type_table(rep: ModelReport) -> Table:
    """Per operator type: time, share, throughput, % of the measured peaks, bound; figures above a
    measured ceiling say why in the notes."""
    rows = []
    for s in rep.types:
        notes = [
            text
            for pct, text in ((s.pct_peak_bandwidth, ABOVE_BANDWIDTH), (s.pct_peak_flops, ABOVE_FLOPS))
            if pct is not None and pct > PEAK_PCT
        ]
        rows.append(
            [
                s.op,
                str(s.kernels),
                str(s.calls),
                f"{s.time_us / 1e3:.3f}",
                f"{100 * s.share:.1f}%",
                f"{s.flops / 1e9:.3f}" if s.flops else "",
                f"{s.tflops:.4g}" if s.tflops else "",
                _pct(s.pct_peak_flops),
                f"{s.gbps:.2f}" if s.gbps else "",
                _pct(s.pct_peak_bandwidth),
                s.bound or "",
                _pct(s.pct_of_roof),
                "; ".join(notes),
            ]
        )
    directions = "forward" if rep.directions == FORWARD else "all directions"
    title = (
        f"{rep.model} {rep.precision} on {rep.device} ({directions}): {rep.total_us / 1e3:.3f} ms in its "
        "measured operators, weighted by calls per forward pass"
    )
    return Table(
        "model-types",
        title,
        [
            "type",
            "kernels",
            "calls",
            "time ms",
            "share",
            "GFLOP",
            "TFLOP/s",
            "% peak FLOPS",
            "GB/s",
            "% copy BW",
            "bound",
            "% of roof",
            "notes",
        ],
        rows,
        ("GFLOP", "kernels"),
    )


def top_table(rep: ModelReport, top: int) -> Table:
    rows = [[o.id, o.label, str(o.count), f"{o.time_us:.1f}", f"{100 * o.share:.1f}%"] for o in rep.operators[:top]]
    return Table(
        "model-top",
        f"top operators of {rep.model} {rep.precision}",
        ["kernel", "shape", "calls", "us per call", "share"],
        rows,
        wrap=("shape",),
    )


def comparison_table(cmp: ModelComparison, pc: PrecisionComparison) -> Table:
    """B vs A per operator type, then the whole model ('all')."""
    shape = ", ".join(f"{what} {v}" for what, v in (("batch", cmp.batch), ("seq", cmp.seq)) if v)
    rows = []
    for tc in pc.types:
        sp = tc.speedup
        rows.append(
            [
                tc.op,
                str(tc.kernels),
                f"{tc.time_a_us / 1e3:.3f}",
                f"{tc.time_b_us / 1e3:.3f}",
                ratio_text(sp),
                ratio_text(sp / pc.flops_ratio) if sp and pc.flops_ratio else "",
                ratio_text(sp / pc.bandwidth_ratio) if sp and pc.bandwidth_ratio else "",
                tc.bound or "",
                "; ".join(tc.flags),
            ]
        )
    rows.append(
        [
            "all",
            str(sum(tc.kernels for tc in pc.types)),
            f"{pc.time_a_us / 1e3:.3f}",
            f"{pc.time_b_us / 1e3:.3f}",
            ratio_text(pc.speedup),
            "",
            "",
            "",
            "",
        ]
    )
    title = (
        f"{cmp.model}{' ' + shape if shape else ''} {pc.precision} "
        f"({'forward' if cmp.directions == FORWARD else 'all directions'}): B vs A per operator type; "
        f"peak FLOPS ratio B/A {ratio_text(pc.flops_ratio)}, "
        f"copy bandwidth ratio {ratio_text(pc.bandwidth_ratio)}"
    )
    return Table(
        "model-compare",
        title,
        ["type", "kernels", "A ms", "B ms", "speed-up", "/ FLOPS ratio", "/ BW ratio", "bound", "notes"],
        rows,
        ("kernels",),
        ("notes",),
    )
