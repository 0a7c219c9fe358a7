"""DeepBench-style tables: one per operation, kernel parameters then figures.

Pure data (headers and rows of strings) so the terminal display, markdown and CSV share it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..kernels.catalog import KERNEL_CLASSES, OPS
from ..kernels.results import KernelResult, Status

OP_TITLES = {"gemm": "Dense matrix multiplication", "conv": "Convolution", "rnn": "Recurrent layers",
             "sparse_gemm": "Sparse matrix multiplication", "all_reduce": "All-reduce"}


@dataclass(frozen=True)
class Table:
    op: str
    title: str
    headers: list[str]
    rows: list[list[str]]


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


def op_table(op: str, results: Iterable[KernelResult]) -> Table:
    fields = list(KERNEL_CLASSES[op].FIELDS)
    directions = [d for d in KERNEL_CLASSES[op].DIRECTIONS if len(KERNEL_CLASSES[op].DIRECTIONS) > 1]
    extra = ["dense (us)", "speedup"] if op == "sparse_gemm" else []
    headers = ["set"] + fields + ["prec"] + [f"{d} (us)" for d in directions] + ["time (us)", "TFLOPS"] + extra + ["status"]
    rows = []
    for r in results:
        if r.op != op:
            continue
        row = [SET_SHORT.get(r.set, r.set)] + [_param(v) for v in r.params.values()] + [r.precision.name.value]
        row += [_part(r, d) for d in directions]
        row += [fmt_us(r.time_us.median if r.time_us else None), fmt_num(r.tflops, 3 if (r.tflops or 0) < 1 else 2)]
        if op == "sparse_gemm":
            dense = r.info.get("dense_time_us", {}).get("median")
            row += [fmt_us(dense), fmt_num(r.info.get("speedup_vs_dense"))]
        row.append(_status(r))
        rows.append(row)
    return Table(op, OP_TITLES[op], headers, rows)


def tables(results: list[KernelResult]) -> list[Table]:
    return [t for t in (op_table(op, results) for op in OPS) if t.rows]
