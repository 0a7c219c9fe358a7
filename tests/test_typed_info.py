"""A part's `info` is read through the typed model of whoever writes it (`info_of`), never by key.

- The structure: no runner module, and no harness module, reads a result's or a part's info by a
  string key (`r.info["x"]`, `p.info.get("x")`, `"x" in r.info`), read statically as
  tests/test_import_graph.py reads imports. Writers keep their keys; the models name them once.
- The models read what runs really recorded (the published runs, through results_file.read_results)
  to the same values as the raw JSON, and what `finish` derives from them (a whole model's inputs
  per second, a sparse GEMM's speed-up over its dense twin) comes out as the run recorded it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.backends.contract.dense_info import DenseTwinInfo
from deepbench.kernels.backends.contract.model_info import ModelRunInfo
from deepbench.kernels.harness.execute import US_PER_S, finish
from deepbench.kernels.harness.padding_info import PaddingInfo
from deepbench.kernels.precision import PRECISIONS
from deepbench.kernels.results import Check, KernelResult, Measurement, PartResult, Status, utcnow
from deepbench.kernels.results_file import read_results
from deepbench.kernels.timing.part_notes import RooflineInfo, TimerNotes
from deepbench.kernels.timing.settling import ClockReading, clock_fell

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "runner" / "published"
# The folders scanned: the host's modules (the published data is not code) and the harness, whose
# `finish` reads what the timers and backends recorded. In the harness a bare `info` is the
# result's info dict too; in runner/ a bare `info` may be another dict (an image's provenance).
SCANNED = {"runner": False, "kernels/harness": True}
INFO = "info"


def _is_info(node: ast.expr, bare: bool) -> bool:
    """`<anything>.info`, or (where `bare`) the name `info`."""
    return (isinstance(node, ast.Attribute) and node.attr == INFO) or (
        bare and isinstance(node, ast.Name) and node.id == INFO
    )


def _is_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def keyed_reads(source: str, bare: bool) -> Iterator[tuple[int, str]]:
    """(line, code) of each read of an info dict by a string key: a subscript that loads, `.get`,
    `in`/`not in`. Writes (`info["x"] = ...`) stay: the writer owns its keys."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            hit = _is_info(node.value, bare) and _is_key(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            hit = _is_info(node.func.value, bare) and bool(node.args) and _is_key(node.args[0])
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            hit = _is_key(node.left) and _is_info(node.comparators[0], bare)
        else:
            continue
        if hit:
            yield node.lineno, ast.unparse(node)


def _scanned_files() -> Iterator[tuple[Path, bool]]:
    for folder, bare in SCANNED.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if PUBLISHED not in path.parents:
                yield path, bare


def test_no_reader_takes_a_parts_info_by_a_string_key() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {code}"
        for path, bare in _scanned_files()
        for line, code in keyed_reads(path.read_text(), bare)
    ]
    assert not found, "read these through info_of(<the writer's PartInfo model>, info):\n" + "\n".join(found)


def test_the_scan_finds_every_kind_of_keyed_read() -> None:
    """What the structure test would have found before the models (so that it can fail)."""
    source = (
        'a = r.info.get("alignment_penalty")\n'
        'b = p.info["clock_fell"]\n'
        'c = "dense_time_us" in info\n'
        'info["throughput_per_s"] = 1.0\n'  # a write: the writer's own key
        'd = images["id"]\n'
    )
    assert [line for line, _ in keyed_reads(source, bare=True)] == [1, 2, 3]
    assert [line for line, _ in keyed_reads(source, bare=False)] == [1, 2]


def _published(run: str) -> list[KernelResult]:
    path = PUBLISHED / run / "results.jsonl"
    if not (path.exists() or path.with_name(path.name + ".gz").exists()):
        pytest.skip(f"no published run {run}")
    return [r for r in read_results(path) if r.status is Status.OK]


def test_a_whole_models_info_reads_as_recorded() -> None:
    results = [r for r in _published("nvidia-h200/model-resnet50-b32") if "items_per_call" in r.info]
    assert results
    for r in results:
        model = info_of(ModelRunInfo, r.info)
        assert model is not None and r.time_us is not None
        assert model.items_per_call == r.info["items_per_call"]
        assert model.throughput_per_s == r.info["throughput_per_s"]
        # finish's figure again, from the recorded median: the same float
        assert model.throughput(r.time_us.median / US_PER_S) == r.info["throughput_per_s"]
        assert ModelRunInfo.of_batch(r.params["batch"]) == {"items_per_call": r.info["items_per_call"]}


@pytest.mark.parametrize("run", ["nvidia-h100/sparse-2of4", "nvidia-h100/inference-server", "arm-emulated/tflite"])
def test_a_dense_twins_info_reads_as_recorded(run: str) -> None:
    results = [r for r in _published(run) if "dense_time_us" in r.info]
    assert results
    for r in results:
        dense = info_of(DenseTwinInfo, r.info)
        assert dense is not None and dense.dense_time_us is not None and r.time_us is not None
        assert dense.dense_time_us.model_dump() == r.info["dense_time_us"]
        assert dense.speedup_vs_dense == r.info["speedup_vs_dense"]
        assert dense.speedup(r.time_us.median) == r.info["speedup_vs_dense"]


@pytest.mark.parametrize("run", ["nvidia-h100/train", "nvidia-h200/model-resnet50-b32"])
def test_the_roofline_reads_as_recorded(run: str) -> None:
    parts = [p for r in _published(run) for p in r.parts if "roofline" in p.info]
    assert parts
    for p in parts:
        recorded = info_of(RooflineInfo, p.info)
        assert recorded is not None and recorded.roofline is not None
        assert recorded.roofline.model_dump(exclude_unset=True) == p.info["roofline"]
        assert recorded.roofline.bound in ("compute", "memory")


def _part(info: dict, median: float = 10.0) -> PartResult:
    samples = [median * 0.99, median, median * 1.01]
    return PartResult(
        direction="fwd",
        measurement=Measurement.of(
            samples,
            method="cpu_perf_counter",
            stop_reason="converged",
            calls_per_sample=1,
            warmup_calls=1,
            target_rel_precision=0.05,
        ),
        flops=1e6,
        min_bytes=1e3,
        check=Check(passed=True, method="test", error=0.0, tolerance=1e-3),
        info=info,
    )


def _base() -> dict:
    return dict(
        id="gemm/train/001/fp32",
        kernel={"op": "gemm", "set": "train", "index": 1, "m": 4, "n": 4, "k": 4, "a_t": False, "b_t": False},
        precision=PRECISIONS["fp32"],
        backend="pytorch",
        started_at=utcnow(),
    )


def test_the_timers_notes_raise_the_flags_they_did() -> None:
    """The notes the timer writes (settling.py's clock fall, kept throttled samples, the profiler's
    verdict) become the result's flags; the clock fall reaches a report as recorded."""
    fell = clock_fell([ClockReading(1980, ("none",)), ClockReading(1500, ("sw_power_cap",))])
    assert fell is not None
    info = {"throttled_samples_kept": 3, "clock_fell": fell, "profiler": {"agrees": False, "ratio": 1.2}}
    notes = info_of(TimerNotes, info)
    assert notes is not None and notes.clock_fell is not None
    assert notes.clock_fell.recorded() == fell
    result = finish(_base(), [_part(info)], {}, {})
    assert {"throttled", "clock-fell", "timing-disagrees"} <= set(result.flags)
    quiet = finish(_base(), [_part({"throttled_samples_kept": True, "profiler": {"agrees": True}})], {}, {})
    assert "throttled" in quiet.flags and "timing-disagrees" not in quiet.flags and "clock-fell" not in quiet.flags


def test_finish_derives_the_penalty_from_the_unpadded_twin() -> None:
    part = _part({}, median=10.0)
    unpadded = {"time_us": _part({}, median=12.0).measurement.stats.model_dump(), "parts": {"fwd": 12.0}}
    result = finish(_base(), [part], {"m": 8}, {"unpadded": unpadded})
    padding = info_of(PaddingInfo, result.info)
    assert padding is not None and result.time_us is not None
    assert padding.alignment_penalty == result.info["alignment_penalty"] == 12.0 / result.time_us.median
    assert list(result.info) == ["unpadded", "alignment_penalty"]  # the JSON's keys, in their order
    none = finish(_base(), [part], {"m": 8}, {"unpadded": {"note": "the x backend does not pad"}})
    assert "alignment_penalty" not in none.info
