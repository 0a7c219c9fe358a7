"""DeepBench-style tables: one per operation, kernel parameters then figures.

Pure data (headers and rows of strings) so the terminal display, markdown and CSV share it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..kernels.catalog import KERNEL_CLASSES, OPS
from ..kernels.layers import LAYER_OPS, LAYER_TITLES
from ..kernels.model_kernel import MODEL_OP, MODEL_TITLE
from ..kernels.results import KernelResult, Status
from .collective_table import DROP_ORDER as ALL_REDUCE_DROP
from .collective_table import HEADERS as ALL_REDUCE_HEADERS
from .collective_table import all_reduce_rows
from .sanity import Context, one_rank
from .sanity import flags as sanity_flags

if TYPE_CHECKING:
    from .sources import Entry

OP_TITLES = {"gemm": "Dense matrix multiplication", "conv": "Convolution", "rnn": "Recurrent layers",
             "sparse_gemm": "Sparse matrix multiplication", "all_reduce": "All-reduce", **LAYER_TITLES,
             MODEL_OP: MODEL_TITLE}


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
    return Table(t.op, t.title, [t.headers[i] for i in keep], [[r[i] for i in keep] for r in t.rows],
                 tuple(h for h in t.droppable if h in t.headers), t.wrap)


def fmt_us(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}" if value < 1e5 else f"{value:,.0f}"


def fmt_num(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


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


# Short marks for flags in tables; reports spell them out.
FLAG_MARK = {"unconverged": "~", "noisy": "±", "throttled": "!"}


def notes(entry: Entry, ctx: Context) -> str:
    """The sanity flags' reasons (runner/sanity.py), for the notes column."""
    return "; ".join(f.reason for f in sanity_flags(entry, ctx))


def op_table(op: str, results: Iterable[KernelResult], ctx: Context | None = None) -> Table:
    """The table deepbench-run prints at the end of a run."""
    from .sources import entry_of_result

    ctx = ctx or Context({})
    results = [r for r in results if r.op == op]
    if op == "all_reduce":  # DeepBench's size, ranks, time; nccl-tests' bandwidths
        return Table(op, OP_TITLES[op], [*ALL_REDUCE_HEADERS, "notes"],
                     [[*row, notes(entry_of_result(r), ctx)]
                      for r, row in zip(results, all_reduce_rows(results, SET_SHORT, _status, fmt_us, fmt_num),
                                        strict=False)],
                     ALL_REDUCE_DROP)
    fields = list(KERNEL_CLASSES[op].FIELDS)
    directions = [d for d in KERNEL_CLASSES[op].DIRECTIONS if len(KERNEL_CLASSES[op].DIRECTIONS) > 1]
    extra = ["dense (us)", "speedup"] if op == "sparse_gemm" else ["items/s"] if op == MODEL_OP else []
    # --pad both: the raw shape's time over the padded one's (kernels/harness/execute.py)
    penalty = any("alignment_penalty" in r.info for r in results)
    extra += ["raw/padded"] if penalty else []
    headers = (["set"] + fields + ["prec"] + [f"{d} (us)" for d in directions] + ["time (us)", "TFLOPS"] + extra
               + ["status", "notes"])
    rows = []
    for r in results:
        row = [SET_SHORT.get(r.set, r.set)] + [_param(v) for v in r.params.values()] + [r.precision.name.value]
        row += [_part(r, d) for d in directions]
        row += [fmt_us(r.time_us.median if r.time_us else None), fmt_num(r.tflops, 3 if (r.tflops or 0) < 1 else 2)]
        if op == "sparse_gemm":
            dense = r.info.get("dense_time_us", {}).get("median")
            row += [fmt_us(dense), fmt_num(r.info.get("speedup_vs_dense"))]
        if op == MODEL_OP:  # images or sequences per second (kernels/harness/execute.py)
            row.append(fmt_num(r.info.get("throughput_per_s"), 1))
        if penalty:
            row.append(fmt_num(r.info.get("alignment_penalty")))
        row += [_status(r), notes(entry_of_result(r), ctx)]
        rows.append(row)
    droppable = ("set", "dense (us)", *(f"{d} (us)" for d in reversed(directions)))
    return Table(op, OP_TITLES[op], headers, rows, droppable)


def tables(results: list[KernelResult], ctx: Context | None = None) -> list[Table]:
    return [t for t in (op_table(op, results, ctx) for op in OPS + LAYER_OPS + (MODEL_OP,)) if t.rows]


# ----- reports: the same tables from any source (a run or a published reference) --------------
def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"


def fmt_sig(value: float | None) -> str:
    """Three significant digits: TFLOPS of a CPU and of a GPU in the same column."""
    return "" if value is None else f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


def _rate(e: Entry) -> str:
    """DeepBench's throughput column: GB/s for all-reduce (none on one rank), TFLOPS for the rest."""
    if e.kernel.op == "all_reduce":
        return "" if one_rank(e) else fmt_sig(e.gbps)
    return fmt_sig(e.tflops)


def status_text(e: Entry) -> str:
    """ok with its marks (~ unconverged, ± noisy, ! throttled), or the status and its reason."""
    if not e.ok:
        return f"{e.status}: {e.reason}"
    return e.status + "".join(f" {FLAG_MARK[f]}" for f in e.flags if f in FLAG_MARK)


def report_table(op: str, entries: Iterable[Entry], ctx: Context) -> Table:
    """One operation's report table: DeepBench's columns (application, parameters, precision,
    time, throughput) then per-direction medians, noise, roofline bound and % of the measured
    peak, status, check, and the notes of the sanity flags (runner/sanity.py)."""
    from .roofline import roof

    cls = KERNEL_CLASSES[op]
    directions = list(cls.DIRECTIONS) if len(cls.DIRECTIONS) > 1 else []
    collective = op == "all_reduce"
    rows = []
    for e in entries:
        if e.kernel.op != op:
            continue
        r = roof(e, ctx.ceilings)
        iqr = e.rel_iqr if e.n > 1 else None
        rows.append([SET_SHORT.get(e.kernel.set, e.kernel.set), e.kernel.application or e.extra.get("application", "")]
                    + [_param(v) for v in e.kernel.params().values()] + [e.precision]
                    + [fmt_us(e.parts_us.get(d)) for d in directions]
                    + ([str(e.extra.get("ranks", "")), fmt_us(e.extra.get("out_of_place_us")),
                        "" if one_rank(e) else fmt_sig(e.extra.get("busbw_gbps"))] if collective else [])
                    + [fmt_us(e.median_us), _rate(e), _pct(None if iqr is None else 100 * iqr),
                       r.bound if r else "", _pct(r.pct_of_peak if r else None), status_text(e), e.check,
                       notes(e, ctx)])
    headers = (["set", "application"] + list(cls.FIELDS) + ["prec"] + [f"{d} (us)" for d in directions]
               + (["ranks", "out-of-place (us)", "bus GB/s"] if collective else [])
               + ["time (us)", "GB/s" if collective else "TFLOPS", "IQR", "bound", "% peak", "status", "check",
                  "notes"])
    droppable = ("check", "set", "application", "bound", "IQR", "out-of-place (us)",
                 *(f"{d} (us)" for d in reversed(directions)), "% peak")
    return Table(op, OP_TITLES.get(op, op), headers, rows, droppable)


def report_tables(entries: list[Entry], ctx: Context) -> list[Table]:
    return [t for t in (report_table(op, entries, ctx) for op in KERNEL_CLASSES) if t.rows]
