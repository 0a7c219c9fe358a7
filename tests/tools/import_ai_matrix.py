"""Copy Alibaba AI Matrix's layer-based benchmark lists into the package as kernels/data/ai_matrix.json.

A maintainer's tool, run when AI Matrix's lists change; the installed package never reads the
checkout. Source: github.com/alibaba/ai-matrix, `layer-based_benchmark/` (Apache-2.0):

- cnn/params/conv.params    `[N,H,W,C] [R,S,C,K] stride`: tf.nn.conv2d, NHWC, padding VALID
- cnn/params/fc.params      `[N,...] outputs`: the input flattened to (N, D), tf.matmul by a (D, outputs) weight
- cnn/params/pool.params    `[N,H,W,C] window stride_h stride_w`: tf.nn.max_pool and avg_pool, VALID
- cnn/params/normal.params  `[N,H,W,C]`: tf.nn.batch_normalization (LRN is commented out of their script)
- cnn/params/active.params  `[N,...]`: relu, sigmoid, tanh and softmax (last axis) over every shape
- rnn/test_rnn_ops.sh       the LSTM/GRU/RNN sweeps (batch, sequence length, units) of rnn_ops.py

What changes on the way in (the notes in the JSON say it too): layouts become DeepBench's (NCHW
convolution, column-major GEMM: TF's row-major (N x D) @ (D x O) is C (O x N) = A (O x D) B (D x N)
with neither operand transposed); VALID padding is padding 0; AI Matrix's BasicRNNCell (tanh) sweep
is left out because RnnKernel's vanilla cell is DeepBench's ReLU one; conv2.params (a filter-count
sweep their script never reads) is left out. Lines are kept in file order, duplicates and all.
AI Matrix's files do not say which network a line comes from: `application` is our attribution
from the batch size and the shapes (ranges below), not theirs.

    python tests/tools/import_ai_matrix.py PATH/TO/ai-matrix
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "kernels" / "data" / "ai_matrix.json"
REPO = "alibaba/ai-matrix"
ROOT = "layer-based_benchmark"
# The versions read (the commit of each file) when the data file was made.
COMMITS = {
    "cnn/params/conv.params": "5e5b923af98c362c74f39f317f3a2d8c1a2ca829",
    "cnn/params/fc.params": "5e5b923af98c362c74f39f317f3a2d8c1a2ca829",
    "cnn/params/pool.params": "9bf23c9915bf19829004c190d155473fe345e768",
    "cnn/params/normal.params": "9f5a1ea1e8a3be64dce996746851453dab53d400",
    "cnn/params/active.params": "9bf23c9915bf19829004c190d155473fe345e768",
    "cnn/cnn_ops.py": "572e8ac17e5ad6fb54c7321e364da15ef1f263c6",
    "rnn/test_rnn_ops.sh": "009dbeaee2d08f3dc0fe3ae51c3d9665049e9c4c",
    "rnn/rnn_ops.py": "9bf23c9915bf19829004c190d155473fe345e768",
}
# Our attribution of line ranges (1-based, inclusive) to networks: batch 64 is AlexNet's
# block, batch 10 GoogLeNet's (7x7 stem, inception 3a), VGG-16's (3x3 convolutions) and
# ResNet's; batch 1 ResNet's and DenseNet-121's (Caffe's 57/29/15/8 maps). ResNet-50 and
# ResNet-152 share every layer shape, so their lines cannot be told apart.
RESNET = "resnet50/152"
APPLICATIONS: dict[str, list[tuple[int, int, str]]] = {
    "conv.params": [
        (1, 5, "alexnet"),
        (6, 14, "googlenet"),
        (15, 20, "vgg16"),
        (21, 59, RESNET),
        (60, 109, "densenet121"),
    ],
    "fc.params": [(1, 3, "alexnet"), (4, 6, "vgg16"), (7, 8, RESNET), (9, 9, "densenet121")],
    "pool.params": [
        (1, 3, "alexnet"),
        (4, 14, "googlenet"),
        (15, 19, "vgg16"),
        (20, 20, RESNET),
        (21, 24, "densenet121"),
    ],
    "normal.params": [(1, 14, RESNET), (15, 77, "densenet121")],
    "active.params": [
        (1, 6, "alexnet"),
        (7, 17, "googlenet"),
        (18, 23, "vgg16"),
        (24, 33, RESNET),
        (34, 96, "densenet121"),
    ],
}
ACTIVATIONS = ("relu", "sigmoid", "tanh")  # cnn_ops.py's activation ops besides softmax
RNN_CELLS = {"lstm": "lstm", "gru": "gru"}  # rnn (BasicRNNCell, tanh) is left out: see the docstring
NOTES = [
    "Shapes from Alibaba AI Matrix's layer-based benchmark (github.com/alibaba/ai-matrix, layer-based_benchmark/, "
    "Apache-2.0), at the commits listed per file; converted by tests/tools/import_ai_matrix.py.",
    "Convolutions: NHWC [N,H,W,C] x [R,S,C,K] with TF's VALID padding become DeepBench's NCHW ConvKernel with pad 0.",
    "Fully connected: TF's row-major (N x D) @ (D x O) is the column-major GEMM m=O, n=N, k=D, a_t=N, b_t=N.",
    "Pooling: every line of pool.params as max and as average pooling (cnn_ops.py runs both), VALID = pad 0.",
    "Normalization: normal.params as inference batch normalization (AI Matrix's uses scalar statistics, "
    "per-channel here); their LRN run is commented out of test_cnn_ops.sh and is not imported.",
    "Activations: relu, sigmoid and tanh over every shape of active.params, then softmax over its last axis.",
    "RNN: the LSTM and GRU sweeps of test_rnn_ops.sh (batch 16, 32 x sequence 32, 64 x units 256..2560 by 256). "
    "Their input vectors have 64 values; the timed forward here is the recurrence alone (DeepBench's rule: the "
    "input projection is one GEMM outside the loop), so the input size does not enter the timed work. The "
    "BasicRNNCell (tanh) sweep is left out: RnnKernel's vanilla cell is DeepBench's ReLU one.",
    "Lines are kept in file order with their duplicates and apparent typos (conv 196 channels, pool 228, "
    "active batch 19, 892 channels). `application` is our attribution by batch size and shape ranges: AI "
    "Matrix's files do not label their lines.",
]


def _dims(text: str) -> list[int]:
    return [int(v) for v in text.strip("[]").split(",")]


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    return [(i, line.split()) for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]


def _application(name: str, line: int) -> str:
    for first, last, app in APPLICATIONS[name]:
        if first <= line <= last:
            return app
    raise ValueError(f"{name}:{line} is outside the attribution ranges")


def _entry(name: str, line: int, params: dict[str, Any]) -> dict[str, Any]:
    return {"application": _application(name, line), "source": f"{name}:{line}", "params": params}


def conv(params_dir: Path) -> list[dict]:
    out = []
    for line, (x, w, stride) in _lines(params_dir / "conv.params"):
        n, h, wd, c = _dims(x)
        r, s, c_w, k = _dims(w)
        assert c_w == c, f"conv.params:{line}: filter channels {c_w} != input channels {c}"
        out.append(
            _entry(
                "conv.params",
                line,
                dict(w=wd, h=h, c=c, n=n, k=k, s=s, r=r, pad_w=0, pad_h=0, stride_w=int(stride), stride_h=int(stride)),
            )
        )
    return out


def fc(params_dir: Path) -> list[dict]:
    out = []
    for line, (x, outputs) in _lines(params_dir / "fc.params"):
        dims = _dims(x)
        depth = 1
        for d in dims[1:]:
            depth *= d
        out.append(_entry("fc.params", line, dict(m=int(outputs), n=dims[0], k=depth, a_t=False, b_t=False)))
    return out


def pooling(params_dir: Path) -> list[dict]:
    rows = _lines(params_dir / "pool.params")
    out = []
    for mode in ("max", "avg"):
        for line, (x, window, stride_h, stride_w) in rows:
            n, h, w, c = _dims(x)
            out.append(
                _entry(
                    "pool.params",
                    line,
                    dict(
                        mode=mode,
                        n=n,
                        c=c,
                        h=h,
                        w=w,
                        r=int(window),
                        s=int(window),
                        pad_h=0,
                        pad_w=0,
                        stride_h=int(stride_h),
                        stride_w=int(stride_w),
                    ),
                )
            )
    return out


def batch_norm(params_dir: Path) -> list[dict]:
    out = []
    for line, (x,) in _lines(params_dir / "normal.params"):
        n, h, w, c = _dims(x)
        out.append(_entry("normal.params", line, dict(n=n, c=c, h=h, w=w)))
    return out


def _elements(dims: list[int]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total


def activation(params_dir: Path) -> list[dict]:
    rows = _lines(params_dir / "active.params")
    return [
        _entry("active.params", line, dict(function=f, elements=_elements(_dims(x))))
        for f in ACTIVATIONS
        for line, (x,) in rows
    ]


def softmax(params_dir: Path) -> list[dict]:
    out = []
    for line, (x,) in _lines(params_dir / "active.params"):
        dims = _dims(x)
        out.append(_entry("active.params", line, dict(rows=_elements(dims[:-1]), cols=dims[-1])))
    return out


def rnn(script: Path) -> list[dict]:
    """rnn_ops.py's loops: for batch, for sequence length, for units (its RnnTestCase order)."""
    out = []
    for line, text in enumerate(script.read_text().splitlines(), 1):
        m = re.search(r"-op_name (\w+)", text)
        if not m or m.group(1) not in RNN_CELLS:
            continue
        arg = {k: int(v) for k, v in re.findall(r"-(\w+) (\d+)", text)}
        for batch in range(arg["min_bs"], arg["max_bs"] + 1, arg["stride_bs"]):
            for steps in range(arg["min_sl"], arg["max_sl"] + 1, arg["stride_sl"]):
                for units in range(arg["min_units"], arg["max_units"] + 1, arg["stride_units"]):
                    out.append(
                        {
                            "application": None,
                            "source": f"test_rnn_ops.sh:{line}",
                            "params": dict(hidden=units, batch=batch, timesteps=steps, cell=RNN_CELLS[m.group(1)]),
                        }
                    )
    return out


def _dump(data: dict) -> str:
    """Indented JSON with one kernel per line (readable diffs, a fifth of the size)."""
    head = {k: v for k, v in data.items() if k != "kernels"}
    text = json.dumps(head, indent=1)[:-2] + ',\n "kernels": {\n'
    ops = []
    for op, entries in data["kernels"].items():
        rows = ",\n".join("   " + json.dumps(e) for e in entries)
        ops.append(f'  "{op}": [\n{rows}\n  ]')
    return text + ",\n".join(ops) + "\n }\n}\n"


def main(checkout: Path) -> None:
    root = checkout / ROOT
    params_dir = root / "cnn" / "params"
    kernels = {
        "conv": conv(params_dir),
        "gemm": fc(params_dir),
        "rnn": rnn(root / "rnn" / "test_rnn_ops.sh"),
        "pooling": pooling(params_dir),
        "batch_norm": batch_norm(params_dir),
        "activation": activation(params_dir),
        "softmax": softmax(params_dir),
    }
    data = {"source": {"repo": REPO, "root": ROOT, "commits": COMMITS}, "notes": NOTES, "kernels": kernels}
    DATA.write_text(_dump(data))
    print(f"{DATA}: " + ", ".join(f"{op} {len(v)}" for op, v in kernels.items()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/tools/import_ai_matrix.py PATH/TO/ai-matrix")
    main(Path(sys.argv[1]))
