"""Excel workbooks laid out like DeepBench's published results: one sheet per precision (a
'Precision' line, then a section per operation: its title in column A, the application in column
B, parameters, times in msec and throughput), and a Specs sheet (hardware, library versions)."""

from __future__ import annotations

from pathlib import Path

from openpyxl import Workbook
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter

from deepbench.kernels.catalog import KERNEL_CLASSES, traits_of
from deepbench.kernels.op_traits import OpTraits, Rate

from ..analysis.roofline import no_roof_reason, roof
from ..analysis.sanity import context_of, one_rank
from ..analysis.sources import MS, Source, precision_order
from .tables import (
    ENERGY_KEYS,
    GB_J_HEADER,
    GFLOP_J_HEADER,
    JOULES_HEADER,
    WATTS_HEADER,
    energy_columns,
    notes,
    status_text,
)

BOLD = Font(bold=True)
# DeepBench's column titles for direction names (its workbooks' words); an operation's traits
# name its fields and any direction it words differently.
DIRECTION_HEADERS = {
    "fwd": "Forward (msec)",
    "bwd_data": "wrt Inputs (msec)",
    "bwd_filter": "wrt Parameters (msec)",
    "bwd": "Time Backward (msec)",
}
MAX_WIDTH = 60
# The energy columns of the tables (tables.py), spelled out as the workbook's other headers are.
WORKBOOK_ENERGY = {
    WATTS_HEADER: "Average power (W)",
    JOULES_HEADER: "Energy per call (J)",
    GFLOP_J_HEADER: "GFLOP/J",
    GB_J_HEADER: "GB/J",
}


def _direction_header(traits: OpTraits, direction: str) -> str:
    return traits.direction_headers.get(direction) or DIRECTION_HEADERS.get(direction, f"{direction} (msec)")


def _sheet_title(precision: str) -> str:
    return f"Results {precision}"[:31]  # Excel's limit on sheet names


def _write_precision_sheet(ws, source: Source, precision: str) -> None:
    entries = [e for e in source.entries if e.precision == precision]
    ctx = context_of(source)
    texts = sorted({e.precision_text for e in entries})
    ws.append(["Precision", precision, None, "; ".join(texts)])
    ws["A1"].font = BOLD
    note = no_roof_reason(source.ceilings, source.kind)
    if note:
        ws.append([None, f"roofline: {note}"])
    for op in KERNEL_CLASSES:  # DeepBench's operations, then any layer kernels
        rows = [e for e in entries if e.kernel.op == op]
        if not rows:
            continue
        cls = KERNEL_CLASSES[op]
        traits = traits_of(op)
        bandwidth = traits.rated_in is Rate.GBPS
        directions = list(cls.DIRECTIONS) if len(cls.DIRECTIONS) > 1 else []
        energy = energy_columns(op, [e.extra for e in rows])  # --energy: the tables' columns, unrounded
        ws.append([])
        headers = (
            [traits.title, "Application"]
            + [traits.field_header(f) for f in cls.FIELDS]
            + [None]
            + [_direction_header(traits, d) for d in directions]
            + [
                "Median total time (msec)" if directions else "Median time (msec)",
                traits.rated_in.workbook_column,
                "IQR (%)",
                "Bound",
                "% of peak",
                *(WORKBOOK_ENERGY[h] for h in energy),
                "Status",
                "Check",
                "Notes",
            ]
        )
        ws.append(headers)
        for cell in ws[ws.max_row]:
            cell.font = BOLD
        for e in rows:
            r = roof(e, source.ceilings)
            params = [("T" if v else "N") if isinstance(v, bool) else v for v in e.kernel.params().values()]
            ms = lambda us: None if us is None else us / MS  # noqa: E731 - a unit, read inline
            iqr = e.rel_iqr if e.n > 1 else None
            ws.append(
                [None, e.kernel.application or e.extra.get("application")]
                + params
                + [None]
                + [ms(e.parts_us.get(d)) for d in directions]
                + [
                    ms(e.median_us),
                    (None if one_rank(e) else e.gbps) if bandwidth else e.tflops,
                    None if iqr is None else round(100 * iqr, 2),
                    r.bound if r else None,
                    None if r is None else round(r.pct_of_peak, 1),
                    *(e.extra.get(ENERGY_KEYS[h]) for h in energy),
                    status_text(e),
                    e.check,
                    notes(e, ctx) or None,
                ]
            )


def _fit_columns(ws) -> None:
    widths: dict[int, int] = {}
    for row in ws.iter_rows():
        for c in row:
            if c.value is not None:
                widths[c.column] = max(widths.get(c.column, 0), len(str(c.value)))
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = min(MAX_WIDTH, width + 2)


def write_workbook(source: Source, path: Path) -> None:
    wb = Workbook()
    wb.remove(wb.active)
    precisions = sorted({e.precision for e in source.entries}, key=precision_order)
    for p in precisions:
        ws = wb.create_sheet(_sheet_title(p))
        _write_precision_sheet(ws, source, p)
        _fit_columns(ws)
    specs = wb.create_sheet("Specs")
    specs.append(["Source", source.label])
    for k, v in source.specs.items():
        specs.append([k, v])
    for name, ceiling in source.ceilings.items():
        specs.append([f"measured ceiling {name}", ceiling])
    for row in specs.iter_rows():
        row[0].font = BOLD
    _fit_columns(specs)
    wb.save(path)
