"""The result model: round trips, versions, and records that cannot lie about their samples."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import PRECISIONS, Precision
from deepbench.kernels.results import Check, KernelResult, Measurement, PartResult, Status, TimeStats, utcnow
from deepbench.kernels.results_file import read_results


def make_result(samples=(10.0, 11.0, 12.0, 10.5)) -> KernelResult:
    m = Measurement.of(
        samples,
        method="cpu-perf-counter",
        calls_per_sample=4,
        warmup_calls=1,
        stop_reason="converged",
        target_rel_precision=0.01,
    )
    check = Check(passed=True, method="reference-fp64", error=1e-7, tolerance=1e-4)
    kernel = by_id()["gemm/train/000"]
    part = PartResult(direction="fwd", measurement=m, flops=kernel.flops(), min_bytes=1.0, check=check)
    now = utcnow()
    return KernelResult(
        id="gemm/train/000/fp32",
        kernel=kernel,
        precision=PRECISIONS[Precision.FP32],
        backend="torch",
        status=Status.OK,
        time_us=m.stats,
        check=check,
        parts=(part,),
        started_at=now,
        ended_at=now,
    )


def test_round_trip_is_exact() -> None:
    r = make_result()
    again = KernelResult.model_validate_json(r.model_dump_json())
    assert again == r
    assert again.time_us.median == 10.75 and again.time_us.n == 4
    assert again.parts[0].measurement.samples_us == (10.0, 11.0, 12.0, 10.5)


def test_schema_version_is_checked() -> None:
    data = json.loads(make_result().model_dump_json())
    assert data["schema_version"] == "deepbench.result/2"
    data["schema_version"] = "deepbench.result/99"
    with pytest.raises(ValidationError):
        KernelResult.model_validate(data)


def test_edited_figure_without_samples_is_rejected() -> None:
    data = json.loads(make_result().model_dump_json())
    data["parts"][0]["measurement"]["stats"]["median"] = 5.0
    with pytest.raises(ValidationError, match="stats do not match"):
        KernelResult.model_validate(data)
    data = json.loads(make_result().model_dump_json())
    data["time_us"]["median"] = 5.0
    with pytest.raises(ValidationError, match="time_us does not match"):
        KernelResult.model_validate(data)


def test_results_are_immutable_and_strict() -> None:
    r = make_result()
    with pytest.raises(ValidationError):
        r.status = Status.FAILED  # type: ignore[misc]
    data = json.loads(r.model_dump_json())
    data["surprise"] = 1
    with pytest.raises(ValidationError):
        KernelResult.model_validate(data)


def test_non_ok_needs_reason_and_ok_needs_passed_check() -> None:
    now = utcnow()
    with pytest.raises(ValidationError, match="needs a reason"):
        KernelResult(
            id="x",
            kernel=by_id()["gemm/train/000"],
            precision=PRECISIONS[Precision.FP32],
            backend="torch",
            status=Status.UNSUPPORTED,
            started_at=now,
            ended_at=now,
        )
    data = json.loads(make_result().model_dump_json())
    data["parts"][0]["check"]["passed"] = False
    with pytest.raises(ValidationError, match="failed check"):
        KernelResult.model_validate(data)


def test_time_stats() -> None:
    s = TimeStats.of([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.median, s.min, s.max, s.p25, s.p75, s.n) == (3.0, 1.0, 5.0, 2.0, 4.0, 5)
    assert s.rel_iqr == pytest.approx(2 / 3)
    total = TimeStats.total([s, s])
    assert total.median == 6.0 and total.n == 5


def test_truncated_last_line_is_dropped(tmp_path) -> None:
    path = tmp_path / "results.jsonl"
    line = make_result().model_dump_json()
    path.write_text(line + "\n" + line[: len(line) // 2])
    assert len(read_results(path)) == 1


def test_op_set_params_are_written_and_checked() -> None:
    data = json.loads(make_result().model_dump_json())
    assert (data["op"], data["set"]) == ("gemm", "train")
    assert data["params"] == {"m": 1760, "n": 16, "k": 1760, "a_t": False, "b_t": False}
    data["params"]["m"] = 99
    with pytest.raises(ValidationError, match="params does not match"):
        KernelResult.model_validate(data)
