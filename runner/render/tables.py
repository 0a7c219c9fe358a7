"""DeepBench-style tables: one per operation, kernel parameters then figures.

Pure data (headers and rows of strings) so the terminal display, markdown and CSV share it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.backends.contract.layout_info import LayoutInfo
from deepbench.kernels.catalog import KERNEL_CLASSES, operations, traits_of
from deepbench.kernels.harness.padding_info import PaddingInfo
from deepbench.kernels.op_traits import InfoColumn, Rate
from deepbench.kernels.results import KernelResult, Status

from ..analysis.sanity import Context, one_rank
from ..analysis.sanity import flags as sanity_flags
from .collective_table import DROP_ORDER as ALL_REDUCE_DROP
from .collective_table import HEADERS as ALL_REDUCE_HEADERS
from .collective_table import collective_rows

if TYPE_CHECKING:
    from ..analysis.sources import Entry


LAYOUT_PENALTY_HEADER = "NCHW/NHWC"  # the layout penalty's columns, one per direction


def op_title(op: str) -> str:
    """The operation's title (its traits), or its name where this version does not know it."""
    return traits_of(op).title


@dataclass(frozen=True)
class Table:
    """`droppable`: the columns a narrow terminal may leave out, the least needed first; the
    others (parameters, precision, time, throughput, status, notes) are always shown. `wrap`:
    columns of words (not numbers) that a narrow terminal may wrap onto several lines."""

    op: str
    title: str
    headers: list[str]
    rows: list[list[str]]
    droppable: tuple[str, ...] = ()
    wrap: tuple[str, ...] = ()


def without_empty_columns(t: Table) -> Table:
    """`t` without the columns blank in every row (a summary's failed column when none failed)."""
    keep = [i for i in range(len(t.headers)) if any(r[i] for r in t.rows)]
    return Table(
        t.op,
        t.title,
        [t.headers[i] for i in keep],
        [[r[i] for i in keep] for r in t.rows],
        tuple(h for h in t.droppable if h in t.headers),
        t.wrap,
    )


def fmt_us(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}" if value < 1e5 else f"{value:,.0f}"


def fmt_num(value: float | None, digits: int = 2) -> str:
    """`digits` decimals, or three significant digits where those would read 0 for a figure that is not
    (a CPU's 0.000386 TFLOP/s, a slow link's 0.004 GB/s): a measured figure never reads 0.000."""
    if value is None:
        return ""
    text = f"{value:.{digits}f}"
    return fmt_sig(value) if value and not text.strip("-0.") else text


# --energy: each kernel's average power, energy per call and work per joule (result_extras.py),
# shown only where some row has them and left out first on a narrow terminal.
WATTS_HEADER, JOULES_HEADER, GFLOP_J_HEADER, GB_J_HEADER = "W", "J/call", "GFLOP/J", "GB/J"
ENERGY_KEYS = {
    WATTS_HEADER: "watts",
    JOULES_HEADER: "joules_per_call",
    GFLOP_J_HEADER: "gflops_per_j",
    GB_J_HEADER: "gb_per_j",
}


def energy_columns(op: str, extras: list[dict]) -> list[str]:
    """The energy headers some row has a value for (none for a run without --energy); work per
    joule in what the operation is rated in (GFLOP/J beside TFLOPS, GB/J beside GB/s)."""
    skip = GFLOP_J_HEADER if traits_of(op).rated_in is Rate.GBPS else GB_J_HEADER
    return [h for h, key in ENERGY_KEYS.items() if h != skip and any(x.get(key) is not None for x in extras)]


def energy_cells(extra: dict, headers: list[str]) -> list[str]:
    return [fmt_sig(extra.get(ENERGY_KEYS[h])) for h in headers]


def _param(v: object) -> str:
    if isinstance(v, bool):
        return "T" if v else "N"
    return str(v)


def _part(result: KernelResult, direction: str) -> str:
    for p in result.parts:
        if p.direction == direction:
            return fmt_us(p.measurement.stats.median)
    return ""


SET_SHORT = {"train": "train", "inference_server": "server", "inference_device": "device"}


def _status(r: KernelResult) -> str:
    if r.status is Status.OK:
        return "ok" + "".join(f" {FLAG_MARK[f]}" for f in r.flags if f in FLAG_MARK)
    return f"{r.status.value}: {r.reason}"


# Every view shows a time as the median of its samples, under this header (a run's tables, report,
# HTML, CSV; the workbook in msec), with the IQR beside it; means appear only where named as means.
TIME_HEADER = "median (us)"
OUT_OF_PLACE_HEADER = "out-of-place median (us)"
IQR_HEADER = "IQR"

# Short marks for flags in tables; reports spell them out.
FLAG_MARK = {"unconverged": "~", "noisy": "±", "throttled": "!", "contended": "c", "clock-fell": "↓"}


def notes(entry: Entry, ctx: Context) -> str:
    """The sanity flags' reasons (runner/analysis/sanity.py), for the notes column."""
    return "; ".join(f.reason for f in sanity_flags(entry, ctx))


def op_table(op: str, results: Iterable[KernelResult], ctx: Context | None = None) -> Table:
    """The table deepbench-run prints at the end of a run."""
    from ..analysis.sources import entry_of_result

    ctx = ctx or Context({})
    results = [r for r in results if r.op == op]
    traits = traits_of(op)
    if traits.collective:  # DeepBench's size, ranks, time; nccl-tests' bandwidths
        return Table(
            op,
            traits.title,
            [*list(ALL_REDUCE_HEADERS), "notes"],
            [
                [*row, notes(entry_of_result(r), ctx)]
                for r, row in zip(results, collective_rows(results, SET_SHORT, _status, fmt_us, fmt_num), strict=False)
            ],
            ALL_REDUCE_DROP,
        )
    cls = KERNEL_CLASSES[op]
    fields = list(cls.FIELDS)
    directions = [d for d in cls.DIRECTIONS if len(cls.DIRECTIONS) > 1]
    extra = [c.header for c in traits.run_columns]
    # --pad both: the raw shape's time over the padded one's (kernels/harness/execute.py)
    penalties = [_penalty(r) for r in results]
    penalty = any(p is not None for p in penalties)
    extra += ["raw/padded"] if penalty else []
    # --layout both: each direction's NCHW time over its NHWC time (kernels/backends/contract/layout_info.py)
    layout_penalties = [_layout_penalties(r) for r in results]
    layout_dirs = [d for d in cls.DIRECTIONS if any(d in p for p in layout_penalties)]
    extra += [f"{LAYOUT_PENALTY_HEADER} {d}" for d in layout_dirs]
    entries = [entry_of_result(r) for r in results]
    energy = energy_columns(op, [e.extra for e in entries])
    headers = (
        ["set"]
        + fields
        + ["prec"]
        + [f"{d} (us)" for d in directions]
        + [TIME_HEADER, IQR_HEADER, traits.rated_in.column]
        + extra
        + energy
        + ["status", "notes"]
    )
    rows = []
    for r, entry, alignment, by_layout in zip(results, entries, penalties, layout_penalties, strict=True):
        row = [SET_SHORT.get(r.set, r.set)] + [_param(v) for v in r.params.values()] + [r.precision.name.value]
        row += [_part(r, d) for d in directions]
        row += [fmt_us(entry.median_us), iqr_text(entry), fmt_sig(r.tflops)]  # as `report` shows it
        row += [_info_cell(c, r.info) for c in traits.run_columns]
        if penalty:
            row.append(fmt_num(alignment))
        row += [fmt_num(by_layout.get(d)) for d in layout_dirs]
        row += energy_cells(entry.extra, energy)
        row += [_status(r), notes(entry, ctx)]
        rows.append(row)
    droppable = (
        *energy,
        *(f"{LAYOUT_PENALTY_HEADER} {d}" for d in layout_dirs),
        "set",
        IQR_HEADER,
        *(c.header for c in traits.run_columns if c.droppable),
        *(f"{d} (us)" for d in reversed(directions)),
    )
    return Table(op, traits.title, headers, rows, droppable)


def _penalty(r: KernelResult) -> float | None:
    """--pad both's raw over padded time, where the harness derived one."""
    padding = info_of(PaddingInfo, r.info)
    return padding.alignment_penalty if padding else None


def _layout_penalties(r: KernelResult) -> dict[str, float]:
    """--layout both's NCHW over NHWC time per direction, where the result timed both layouts."""
    layout = info_of(LayoutInfo, r.info)
    return layout.penalties(r.parts) if layout else {}


def _info_cell(column: InfoColumn, info: dict) -> str:
    """An operation's own run-table column (its traits), from the result's info."""
    value = column.value(info)
    return fmt_us(value) if column.kind == "us" else fmt_num(value, column.digits)


def tables(results: list[KernelResult], ctx: Context | None = None) -> list[Table]:
    return [t for t in (op_table(op, results, ctx) for op in operations()) if t.rows]


# ----- reports: the same tables from any source (a run or a published reference) --------------
def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"


def fmt_sig(value: float | None) -> str:
    """Three significant digits: TFLOPS of a CPU and of a GPU in the same column."""
    return "" if value is None else f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _rate(e: Entry) -> str:
    """DeepBench's throughput column, in what the operation is rated in: GB/s for a collective
    (none on one rank), TFLOPS for the rest."""
    if traits_of(e.kernel.op).rated_in is Rate.GBPS:
        return "" if one_rank(e) else fmt_sig(e.gbps)
    return fmt_sig(e.tflops)


def iqr_text(e: Entry) -> str:
    """The spread beside every median: the interquartile range over the median, in %."""
    iqr = e.rel_iqr if e.n > 1 else None
    return _pct(None if iqr is None else 100 * iqr)


def status_text(e: Entry) -> str:
    """ok with its marks (~ unconverged, ± noisy, ! throttled), or the status and its reason."""
    if not e.ok:
        return f"{e.status}: {e.reason}"
    return e.status + "".join(f" {FLAG_MARK[f]}" for f in e.flags if f in FLAG_MARK)


def report_table(op: str, entries: Iterable[Entry], ctx: Context) -> Table:
    """One operation's report table: DeepBench's columns (application, parameters, precision,
    time, throughput) then per-direction medians, noise, roofline bound and % of the measured
    peak, status, check, and the notes of the sanity flags (runner/analysis/sanity.py)."""
    from ..analysis.roofline import roof

    cls = KERNEL_CLASSES[op]
    traits = traits_of(op)
    directions = list(cls.DIRECTIONS) if len(cls.DIRECTIONS) > 1 else []
    collective = traits.collective
    entries = [e for e in entries if e.kernel.op == op]
    energy = energy_columns(op, [e.extra for e in entries])
    rows = []
    for e in entries:
        r = roof(e, ctx.ceilings)
        rows.append(
            [SET_SHORT.get(e.kernel.set, e.kernel.set), e.kernel.application or e.extra.get("application", "")]
            + [_param(v) for v in e.kernel.params().values()]
            + [e.precision]
            + [fmt_us(e.parts_us.get(d)) for d in directions]
            + (
                [
                    str(e.extra.get("ranks", "")),
                    fmt_us(e.extra.get("out_of_place_us")),
                    "" if one_rank(e) else fmt_sig(e.extra.get("busbw_gbps")),
                ]
                if collective
                else []
            )
            + [
                fmt_us(e.median_us),
                _rate(e),
                iqr_text(e),
                r.bound if r else "",
                _pct(r.pct_of_peak if r else None),
                *energy_cells(e.extra, energy),
                status_text(e),
                e.check,
                notes(e, ctx),
            ]
        )
    headers = (
        ["set", "application"]
        + list(cls.FIELDS)
        + ["prec"]
        + [f"{d} (us)" for d in directions]
        + (["ranks", OUT_OF_PLACE_HEADER, "bus GB/s"] if collective else [])
        + [TIME_HEADER, traits.rated_in.column, IQR_HEADER, "bound", "% peak"]
        + energy
        + ["status", "check", "notes"]
    )
    droppable = (
        *energy,
        "check",
        "set",
        "application",
        "bound",
        IQR_HEADER,
        OUT_OF_PLACE_HEADER,
        *(f"{d} (us)" for d in reversed(directions)),
        "% peak",
    )
    return Table(op, traits.title, headers, rows, droppable)


def report_tables(entries: list[Entry], ctx: Context) -> list[Table]:
    return [t for t in (report_table(op, entries, ctx) for op in KERNEL_CLASSES) if t.rows]
