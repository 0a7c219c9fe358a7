"""Copy DeepBench's kernel lists into the package and label each kernel with its application.

A maintainer's tool, run once when DeepBench's data in tests/fixtures/deepbench changes; the installed
package never reads it. The kernel workbooks list kernels in a different order from DeepBench's
`*_problems.h` (which is what kernels/data/<op>.json keeps), so the application of a kernel is
found by matching its parameters (and, for inference, its platform) against the workbook rows.

    python tests/tools/import_deepbench.py [tests/fixtures/deepbench]
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "kernels" / "data"
DEEPBENCH_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "deepbench"
OPS = ("gemm", "conv", "rnn", "sparse_gemm", "all_reduce")
SECTION_OP = {
    "Dense Matrix Multiplication": "gemm",
    "Sparse Matrix Multiplication": "sparse_gemm",
    "Convolution": "conv",
    "Recurrent Layers - Vanilla": "rnn:vanilla",
    "Recurrent Layers - LSTM": "rnn:lstm",
    "Recurrent Layers - GRU": "rnn:gru",
    "All-Reduce": "all_reduce",
}
# Number of leading parameter columns (after 'Source') per operation in the workbooks.
PARAM_COLUMNS = {"gemm": 5, "sparse_gemm": 6, "conv": 11, "rnn": 3, "all_reduce": 1}


def _key(op: str, values: list) -> tuple:
    out = []
    for v in values:
        if v in ("N", "T"):
            out.append(v == "T")
        elif isinstance(v, float) and v.is_integer() and op != "sparse_gemm":
            out.append(int(v))
        else:
            out.append(v)
    return tuple(out)


def workbook_rows(path: Path) -> list[tuple[str, tuple, str, str]]:
    """(op, params key, application, platform) for every kernel row of a kernel workbook."""
    rows = json.loads(path.read_text())["sheets"]["Kernels"]
    section = None
    out = []
    for row in rows:
        if row[0] is not None:
            section = SECTION_OP[row[0].strip()]
            continue
        if row[1] == "Source" or section is None:
            continue
        op, _, cell = section.partition(":")
        ncols = PARAM_COLUMNS[op]
        params = list(row[2 : 2 + ncols])
        platform = row[2 + ncols] if len(row) > 2 + ncols and isinstance(row[2 + ncols], str) else ""
        if op == "rnn":
            params.append(cell)
        out.append((op, _key(op, params), str(row[1]).strip(), platform or ""))
    return out


def label(shared: Path) -> dict:
    labels: dict = {}
    train = workbook_rows(shared / "workbooks" / "DeepBenchKernels_train.json")
    inference = workbook_rows(shared / "workbooks" / "DeepBenchKernels_inference.json")
    for op in OPS:
        data = json.loads((shared / "kernels" / f"{op}.json").read_text())
        fields = data["fields"]
        for set_name, kernels in data["sets"].items():
            rows = train if set_name == "train" else inference
            wanted = {"train": "", "inference_server": "Server", "inference_device": "Device"}[set_name]
            names = []
            for kernel in kernels:
                values = [kernel[f] for f in fields]
                if op == "all_reduce":
                    values = values[:1]
                key = _key(op, values)
                apps = [a for (o, k, a, p) in rows if o == op and k == key and wanted in p]
                apps = apps or [a for (o, k, a, _) in rows if o == op and k == key]
                names.append(apps[0] if apps else None)
            labels.setdefault(op, {})[set_name] = names
    return labels


def main(shared: Path) -> None:
    for op in OPS:
        shutil.copyfile(shared / "kernels" / f"{op}.json", DATA / f"{op}.json")
    labels = label(shared)
    (DATA / "applications.json").write_text(json.dumps(labels, indent=1) + "\n")
    missing = sum(v is None for sets in labels.values() for names in sets.values() for v in names)
    print(f"wrote {DATA}; {missing} kernels without an application in the workbooks")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEEPBENCH_DATA)
