"""tests/benchmarks/sbs_repeat.py: two sittings of a native side-by-side, each side's movement counted."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from .test_interleaved import load

load("conv_repeatability")
repeat = load("sbs_repeat")


def sitting(path: Path, figures: dict[str, tuple[float, float]], zipped: bool = False) -> Path:
    """A side-by-side JSON as native_side_by_side.py --json writes it: id -> (harness us, native us)."""
    rows = [{"id": kid, "op": "gemm", "precision": "fp16", "direction": "fwd", "harness_us": h,
             "native_best_us": n, "ratio": h / n} for kid, (h, n) in figures.items()]
    rows.append({"id": "gemm/x/9/fp16", "op": "gemm", "precision": "fp16", "direction": "fwd", "error": "no output"})
    text = json.dumps({"rows": rows, "summary": []})
    if zipped:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_each_sides_movement_and_the_band_per_file(tmp_path, capsys):
    a = sitting(tmp_path / "a.json", {"gemm/x/0/fp16": (100.0, 100.0), "gemm/x/1/fp16": (30.0, 30.3)})
    b = sitting(tmp_path / "b.json.gz", {"gemm/x/0/fp16": (101.0, 110.0), "gemm/x/1/fp16": (30.0, 30.0)}, zipped=True)
    assert repeat.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "harness/native within [0.95, 1.05] per file: 2 (100.0%), 1 (50.0%)" in out
    assert "file 1 against file 0, times within 3%: harness 2 of 2, native loop 1 of 2" in out
    assert "gemm/x/9" not in out  # a row without a ratio is not compared


def test_one_file_or_nothing_in_common_is_an_error(tmp_path, capsys):
    a = sitting(tmp_path / "a.json", {"gemm/x/0/fp16": (1.0, 1.0)})
    b = sitting(tmp_path / "b.json", {"gemm/x/1/fp16": (1.0, 1.0)})
    assert repeat.main([str(a), str(b)]) == 1
    assert "no problem is compared in every file" in capsys.readouterr().err
    assert repeat.main([str(a), str(tmp_path / "missing.json")]) == 2
