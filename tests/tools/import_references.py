"""Convert DeepBench's published result workbooks into reference runs (package data).

A maintainer's tool, run when DeepBench's data in tests/fixtures/deepbench changes; the installed
package reads only runner/data/references/*.json.gz. The workbooks' layouts differ from one processor to the next
(columns added, moved or renamed: 'R','S','pad_h' first on AMD, 'S (Filter width)' first on
NVIDIA; one backward column or two for RNNs), so every section is read by its header names,
never by fixed positions, and each row is tied to the catalog kernel with the same parameters.

    python tests/tools/import_references.py [tests/fixtures/deepbench [OUT_DIR]]
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

from deepbench.kernels.catalog import KERNEL_CLASSES, catalog
from deepbench.runner.analysis.references import REFERENCE_SUFFIX, SET_PREFIX, Reference, ReferenceEntry

OUT = Path(__file__).resolve().parents[2] / "runner" / "data" / "references"
DEEPBENCH_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "deepbench"

# Section titles in column 0 -> (op, cell).
SECTIONS = {
    "dense matrix multiplication": ("gemm", None),
    "sparse matrix multiplication": ("sparse_gemm", None),
    "convolution": ("conv", None),
    "recurrent layers - vanilla": ("rnn", "vanilla"),
    "recurrent layers - lstm": ("rnn", "lstm"),
    "recurrent layers - gru": ("rnn", "gru"),
    "all-reduce": ("all_reduce", None),
}

# Header (lower case, text before any '(' , spaces collapsed) -> our field. Times are in ms.
HEADERS = {
    "gemm": {
        "m": "m",
        "n": "n",
        "k": "k",
        "a transpose": "a_t",
        "b transpose": "b_t",
        "time": "t:fwd",
        "teraflops": "tflops",
        "gigaflops": "gflops",
        "padded kernels": "x:padded",
    },
    "sparse_gemm": {
        "m": "m",
        "n": "n",
        "k": "k",
        "a transpose": "a_t",
        "b transpose": "b_t",
        "sparsity": "sparsity",
        "sparse time": "t:fwd",
        "dense time": "x:dense_ms",
        "sparseteraflops": "tflops",
        "sparse teraflops": "tflops",
        "sparse gigaflops": "gflops",
        "speedup wrt dense": "x:speedup",
    },
    "conv": {
        "w": "w",
        "h": "h",
        "c": "c",
        "n": "n",
        "k": "k",
        "s": "s",
        "r": "r",
        "pad_w": "pad_w",
        "pad_h": "pad_h",
        "horizontal stride": "stride_w",
        "vertical stride": "stride_h",
        "forward": "t:fwd",
        "wrt inputs": "t:bwd_data",
        "wrt parameters": "t:bwd_filter",
        "total time": "total",
        "fwd teraflops": "tflops",
        "fwd gigaflops": "gflops",
        "forward algorithm": "x:algorithm",
        "padded kernels": "x:padded",
    },
    "rnn": {
        "hidden units": "hidden",
        "input": "hidden",
        "n": "batch",
        "timesteps": "timesteps",
        "time forward": "t:fwd",
        "time backward": "t:bwd",
        "time backward wrt inputs": "t:bwd_inputs",
        "time backward wrt weights": "t:bwd_weights",
        "total time": "total",
        "teraflops fwd": "tflops",
        "fwd teraflops": "tflops",
    },
    "all_reduce": {
        "size # floats": "floats",
        "# nodes": "x:ranks",
        "# chips / accelerator cards": "x:ranks",
        "mean all reduce time": "t:fwd",
        "gigabytes/sec": "gbps",
        "selected algorithm": "x:algorithm",
        "std dev all reduce time": "x:std_ms",
    },
}

# A sheet's precision text -> our precision per operation (the texts are few; an unknown one
# stops the tool rather than guessing). fp16 in DeepBench's training sheets means 16-bit inputs
# with 32-bit accumulation (P100's "pseudo fp16" multiplies in 32 bits: the same arithmetic,
# since a product of two fp16 numbers is exact in fp32). gemm_bench.cu at DeepBench's head asks
# cuBLAS for fp16 compute (this tool's fp16acc16), but the sheets state 32-bit addition and do not
# record which call made each figure: the references keep the precision their sheets state, and
# `compare --any-precision` warns where an fp16acc16 run meets them (docs/measuring.md).
ALL = ("gemm", "sparse_gemm", "conv", "rnn", "all_reduce")
PRECISION_TEXTS = {
    "float": dict.fromkeys(ALL, "fp32"),
    "16 bit inputs, 16 bit multiplication, 32 bit addition": dict.fromkeys(ALL, "fp16"),
    "16 bit inputs, 32 bit multiplication, 32 bit addition": dict.fromkeys(ALL, "fp16"),
    "gemm, conv: int8 multiplication, 32 bit accumulation | sparse ops, rnn: single precision": {
        "gemm": "int8",
        "conv": "int8",
        "sparse_gemm": "fp32",
        "rnn": "fp32",
    },
    "int8 inputs 32 bit math": {"gemm": "int8", "sparse_gemm": "int8", "conv": "int8", "rnn": "int8"},
    "int8 inputs 32 bit math | convolution results are still in float, since int8 isn't supported": {
        "gemm": "int8",
        "sparse_gemm": "int8",
        "conv": "fp32",
        "rnn": "int8",
    },
}
# Processor names as the file names spell them (DeepBench_<vendor>_<processor>.json).
APP_COL = 1  # the application ("Source") column, titled or not
FILE_NAME = re.compile(r"DeepBench_(?:(?:NV|AMD|IA)_)?(?P<proc>.+)\.json$")


def _header(text: object) -> str:
    return re.sub(r"\s+", " ", str(text).split("(")[0]).strip().lower()


def _value(v: object) -> object:
    if v in ("N", "T"):
        return v == "T"
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _precision_text(rows: list[list]) -> str:
    """The words in the rows above the first section: 'Precision', text, ... note."""
    words = []
    for row in rows:
        if row and isinstance(row[0], str) and _header(row[0]) in SECTIONS:
            break
        words += [str(c).strip() for c in row[1:] if isinstance(c, str) and c.strip()]
    return " | ".join(words)


class Catalog:
    """Catalog kernels by (op, set, parameters), to tie workbook rows to kernel ids."""

    def __init__(self) -> None:
        self.index: dict[tuple, object] = {}
        for k in catalog():
            key = (k.op, k.set, self.params_key(k.op, k.params()))
            self.index.setdefault(key, k)

    @staticmethod
    def params_key(op: str, params: dict) -> tuple:
        if op == "all_reduce":
            return (params["floats"],)
        return tuple((f, params[f]) for f in KERNEL_CLASSES[op].FIELDS)

    def find(self, op: str, set_name: str, params: dict):
        key = self.params_key(op, params)
        hit = self.index.get((op, set_name, key))
        if hit is None:  # the same kernel listed under another set
            hit = next((k for (o, s, p), k in self.index.items() if o == op and p == key), None)
        return hit


def convert_sheet(
    sheet: str, rows: list[list], set_name: str, cat: Catalog, skipped: list[str]
) -> tuple[str, list[ReferenceEntry]]:
    text = _precision_text(rows)
    if text.lower() not in PRECISION_TEXTS:
        raise SystemExit(f"{sheet}: unknown precision text {text!r}: add it to PRECISION_TEXTS")
    precisions = PRECISION_TEXTS[text.lower()]
    entries: list[ReferenceEntry] = []
    op = cell = None
    columns: dict[int, str] = {}
    for i, row in enumerate(rows):
        first = _header(row[0]) if row and isinstance(row[0], str) else None
        if first in SECTIONS:
            op, cell = SECTIONS[first]
            columns = {}
        if op is None:
            continue
        names = {j: _header(c) for j, c in enumerate(row) if j >= 1 and isinstance(c, str)}
        known = HEADERS[op]
        if sum(1 for h in names.values() if h in known) >= 3:  # a header row
            columns = {j: known[h] for j, h in names.items() if h in known}
            continue
        if first is not None or not columns:
            continue
        fields = KERNEL_CLASSES[op].FIELDS
        raw = {f: _value(row[j]) for j, f in columns.items() if j < len(row)}
        params = {f: raw.get(f) for f in fields if f not in ("cell", "repeat")}
        if op == "rnn":
            params["cell"] = cell
        if any(v is None or isinstance(v, str) for k, v in params.items() if k != "cell"):
            if any(v is not None for v in params.values() if v != cell):
                skipped.append(f"{sheet} row {i}: not a kernel row ({row[:6]})")
            continue
        if op == "all_reduce":
            params = {"floats": params["floats"]}
        kernel = cat.find(op, set_name, {**params, "repeat": None} if op == "all_reduce" else params)
        if kernel is None:
            skipped.append(f"{sheet} row {i}: {op} {params} is not in DeepBench's kernel lists")
            continue
        times = {f[2:]: _number(v) for f, v in raw.items() if f.startswith("t:")}
        notes = {f[2:]: v for f, v in raw.items() if f.startswith("t:") and isinstance(v, str)}
        extra = {f[2:]: v for f, v in raw.items() if f.startswith("x:") and v is not None}
        extra.update({f"{d}_note": v for d, v in notes.items()})
        if "bwd_inputs" in times or "bwd_weights" in times:
            parts = [times.pop("bwd_inputs", None), times.pop("bwd_weights", None)]
            extra["bwd_inputs_ms"], extra["bwd_weights_ms"] = parts
            times["bwd"] = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
        timed = {d: t for d, t in times.items() if t is not None}
        throughput = {}
        if _number(raw.get("tflops")) is not None:
            throughput["tflops"] = _number(raw["tflops"])
        if _number(raw.get("gflops")) is not None:
            throughput["tflops"] = _number(raw["gflops"]) / 1e3
        if _number(raw.get("gbps")) is not None:
            throughput["gbps"] = _number(raw["gbps"])
        application = row[APP_COL] if len(row) > APP_COL and isinstance(row[APP_COL], str) else None
        if application:
            extra["application"] = application.strip()
        total = _number(raw.get("total"))
        if timed.get("fwd") is None:
            if not notes:  # a blank cell: the workbook has no figure, which is not a claim of no support
                skipped.append(f"{sheet} row {i}: {kernel.id} has no time")
                continue
            reason = "; ".join(f"{d}: {v}" for d, v in notes.items())
            entries.append(
                ReferenceEntry(
                    kernel_id=kernel.id,
                    precision=precisions.get(op, "fp32"),
                    precision_text=text,
                    status="unsupported",
                    reason=f"published as {reason}",
                    extra=extra,
                    sheet=sheet,
                    row=i,
                )
            )
            continue
        entries.append(
            ReferenceEntry(
                kernel_id=kernel.id,
                precision=precisions[op],
                precision_text=text,
                times_ms=timed,
                total_ms=total if total is not None else sum(timed.values()),
                throughput=throughput,
                extra=extra,
                sheet=sheet,
                row=i,
            )
        )
    return text, entries


def convert(path: Path, set_name: str, cat: Catalog) -> Reference:
    data = json.loads(path.read_text())
    proc = FILE_NAME.match(path.name)
    if not proc:
        raise SystemExit(f"{path}: unexpected file name")
    specs: dict[str, str] = {}
    sheets: dict[str, str] = {}
    entries: list[ReferenceEntry] = []
    skipped: list[str] = []
    for sheet, rows in data["sheets"].items():
        if sheet.strip().lower() == "specs":
            for row in rows:
                cells = [c for c in row if c is not None]
                if len(cells) >= 2:
                    specs[str(cells[0]).strip()] = str(cells[1]).strip()
                elif len(cells) == 1:
                    specs.setdefault("System", str(cells[0]).strip())
            continue
        text, got = convert_sheet(sheet, rows, set_name, cat, skipped)
        sheets[sheet] = text
        entries += got
    processor = proc.group("proc")
    return Reference(
        name=f"{SET_PREFIX[set_name]}/{processor}",
        processor=processor,
        set=set_name,
        source=data.get("source", path.name),
        specs=specs,
        sheets=sheets,
        entries=tuple(entries),
        skipped=tuple(skipped),
    )


def dump(ref: Reference) -> str:
    """Compact JSON with one entry per line (small package data, readable diffs)."""
    data = ref.model_dump(mode="json")
    entries = data.pop("entries")
    head = json.dumps(data, indent=1)[:-2]
    lines = ",\n".join(json.dumps(e, separators=(",", ":")) for e in entries)
    return f'{head},\n "entries": [\n{lines}\n]}}\n'


def workbook_set(path: Path, results: Path) -> str:
    rel = path.relative_to(results).parts
    if rel[0] == "train":
        return "train"
    return "inference_device" if "device" in rel else "inference_server"


def main(shared: Path, out_dir: Path = OUT) -> None:
    results = shared / "workbooks" / "results"
    cat = Catalog()
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(f"*{REFERENCE_SUFFIX}"):
        old.unlink()
    for path in sorted(results.rglob("*.json")):
        ref = convert(path, workbook_set(path, results), cat)
        out = out_dir / (ref.name.replace("/", "_") + REFERENCE_SUFFIX)
        # mtime 0 and no file name in the header: the same workbooks give the same bytes
        out.write_bytes(gzip.compress(dump(ref).encode(), mtime=0))
        ok = sum(e.status == "ok" for e in ref.entries)
        print(
            f"{ref.name:28} {ok:4} timed, {len(ref.entries) - ok:3} unsupported, {len(ref.skipped):3} skipped  "
            f"<- {path.relative_to(shared)}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEEPBENCH_DATA, Path(sys.argv[2]) if len(sys.argv) > 2 else OUT)
