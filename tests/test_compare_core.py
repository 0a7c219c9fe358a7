"""The comparison core under `compare` and `fastest` (issue 45): like with like.

Small fixtures built from the same Entry/Source shapes the loaders produce: a V100-like
reference that published only fwd + bwd_filter of a convolution beside runs that timed three
directions, and one-rank all-reduces; then the same questions on the shipped H100/H200 runs."""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.catalog import by_id
from deepbench.runner.analysis.bootstrap import bootstrap_medians
from deepbench.runner.analysis.compare import compare, directions_of
from deepbench.runner.analysis.fastest import ONE_RANK_NOTE, fastest_tables, wins
from deepbench.runner.analysis.sources import Entry, Source
from deepbench.runner.analysis.unlike import differences, refusal
from deepbench.runner.render.textformats import csv_text

from .conftest import REPO, run_cli

PUBLISHED = REPO / "runner" / "published"
CONV = by_id()["conv/train/001"]  # 700x161, c=1, n=8: DeepBench's V100 published fwd + bwd_filter only
ALL_REDUCE = by_id()["all_reduce/train/000"]


def _samples(us: float, n: int = 21) -> tuple[float, ...]:
    return tuple(us * (1 + 0.001 * (i - n // 2)) for i in range(n))


def run_entry(kernel, parts: dict[str, float], ranks: int | None = None, gbps: float | None = None) -> Entry:
    total = sum(parts.values())
    extra = {"ranks": ranks} if ranks is not None else {}
    return Entry(
        kernel=kernel,
        precision="fp32",
        precision_text="",
        status="ok",
        median_us=total,
        p25_us=total * 0.99,
        p75_us=total * 1.01,
        n=21,
        parts_us=dict(parts),
        part_samples={d: _samples(t) for d, t in parts.items()},
        flops=sum(kernel.flops(d) for d in parts if d in kernel.DIRECTIONS),
        tflops=1.0,
        gbps=gbps,
        extra=extra,
    )


def source(label: str, kind: str, *entries: Entry) -> Source:
    return Source(label=label, kind=kind, entries=tuple(entries), specs={}, ceilings={})


def reference_entry(kernel, parts: dict[str, float]) -> Entry:
    total = sum(parts.values())
    return Entry(
        kernel=kernel,
        precision="fp32",
        precision_text="Float",
        status="ok",
        median_us=total,
        p25_us=total - 0.5,
        p75_us=total + 0.5,
        n=1,
        parts_us=dict(parts),
        check="published",
    )


# The runs: slower than the V100 on all three directions summed, twice as fast on the two it published.
RUN_PARTS = {"fwd": 80.0, "bwd_data": 300.0, "bwd_filter": 90.0}
V100_PARTS = {"fwd": 160.0, "bwd_filter": 187.0}


def _sources() -> list[Source]:
    return [
        source("H100", "run", run_entry(CONV, RUN_PARTS), run_entry(ALL_REDUCE, {"fwd": 20.0}, 1, 12_777.0)),
        source(
            "H200",
            "run",
            run_entry(CONV, {d: t * 1.01 for d, t in RUN_PARTS.items()}),
            run_entry(ALL_REDUCE, {"fwd": 18.8}, 1, 13_000.0),
        ),
        source("DeepBench V100", "reference", reference_entry(CONV, V100_PARTS)),
    ]


def _row(table, **params: str) -> dict[str, str]:
    rows = [dict(zip(table.headers, r, strict=True)) for r in table.rows]
    return next(r for r in rows if all(r[k] == v for k, v in params.items()))


def test_fastest_ranks_on_the_common_directions_and_names_them() -> None:
    sources = _sources()
    assert sum(RUN_PARTS.values()) > sum(V100_PARTS.values())  # the trap: three directions against two
    conv = next(t for t in fastest_tables(sources) if t.op == "conv")
    row = _row(conv, n="8")
    assert row["on"] == "fwd+bwd_filter"
    assert row["fastest"] == "H100" and row["time (us)"] == "170.0"  # 80 + 90, not 470
    assert row["DeepBench V100 (us)"] == "347.0" and row["H200 (us)"] == "171.7"
    assert row["runner-up"] == "H200: 1.01x slower"
    counts = {(r[0], r[1]): r[2] for r in wins(fastest_tables(sources), sources).rows}
    assert counts[("conv", "DeepBench V100")] == "0"


def test_compare_uses_the_same_directions_for_its_times_and_verdict() -> None:
    sources = _sources()
    cmp = compare([sources[2], sources[0]])  # the reference is the baseline
    ratio = next(r.ratios[0] for r in cmp.rows if r.any.kernel.id == CONV.id)
    assert ratio.directions == ("fwd", "bwd_filter") and ratio.note == "on fwd+bwd_filter"
    assert ratio.base_us == 347.0 and ratio.other_us == 170.0 and ratio.verdict == "faster"


def test_a_one_rank_all_reduce_is_not_ranked_and_has_no_bandwidth() -> None:
    sources = _sources()
    tables = fastest_tables(sources)
    ar = next(t for t in tables if t.op == "all_reduce")
    row = _row(ar, ranks="1")
    assert row["fastest"] == "" and row["GB/s"] == "" and row["runner-up"] == "" and row["note"] == ONE_RANK_NOTE
    assert row["H100 (us)"] == "20.0" and row["H200 (us)"] == "18.8"  # the local cost is shown, not crowned
    text = csv_text(tables)
    for r in csv.DictReader(io.StringIO(text)):
        if r["operation"] == "all_reduce":
            assert r["GB/s"] == "" and "12,777" not in text and "13,000" not in text
    counts = {(r[0], r[1]): (r[2], r[3]) for r in wins(tables, sources).rows}
    assert counts[("all_reduce", "H200")] == ("0", "0")


def test_directions_with_nothing_in_common() -> None:
    a = run_entry(CONV, {"fwd": 1.0, "bwd_data": 2.0})
    b = reference_entry(CONV, {"bwd_filter": 3.0, "bwd_data": 4.0})
    assert directions_of([a, b]).common == ("bwd_data",)
    c = reference_entry(CONV, {"bwd_filter": 3.0})
    assert directions_of([a, c]) is None
    one, other = run_entry(ALL_REDUCE, {"in_place": 1.0}), reference_entry(ALL_REDUCE, {"fwd": 2.0})
    d = directions_of([one, other])
    assert d.per_entry == (("in_place",), ("fwd",)) and d.note == "compared fwd with in_place"


@pytest.mark.parametrize("n", [5, 6, 41, 200])
def test_bootstrap_medians_match_a_literal_resampling(n: int) -> None:
    """The order-statistic draw has the distribution of the median of n draws with replacement."""
    rng = np.random.default_rng(n)
    x = rng.lognormal(0, 0.3, n)
    fast = bootstrap_medians([x], 100_000, np.random.default_rng(1))[0]
    slow = np.median(x[np.random.default_rng(2).integers(0, n, (100_000, n))], axis=1)
    for q in (2.5, 25, 50, 75, 97.5):
        lo, hi = np.percentile(slow, [max(q - 1, 0), min(q + 1, 100)])
        assert lo <= np.percentile(fast, q) <= hi, q
    assert fast.mean() == pytest.approx(slow.mean(), rel=0.01)
    assert set(np.unique(fast)) <= {(a + b) / 2 for a in x for b in x}


def test_fastest_needs_two_sources(tmp_path: Path) -> None:
    p = run_cli("deepbench", "fastest", "--reference", "V100")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "at least 2 sources" in p.stderr


@pytest.mark.skipif(not (PUBLISHED / "nvidia-h200" / "train").exists(), reason="published runs not in this tree")
def test_fastest_on_the_published_runs_names_no_v100_win_on_700x161() -> None:
    p = run_cli(
        "deepbench",
        "fastest",
        f"H100={PUBLISHED / 'nvidia-h100' / 'train'}",
        f"H200={PUBLISHED / 'nvidia-h200' / 'train'}",
        "--reference",
        "V100",
        "--format",
        "csv",
        "--allow-unlike",  # the H100's convolutions ran NCHW throughout (older than --layout)
    )
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    first_layer = [
        r
        for r in rows
        if r["operation"] == "conv" and (r["w"], r["h"], r["c"]) == ("700", "161", "1") and r["DeepBench V100 (us)"]
    ]
    assert first_layer and all(r["fastest"] != "DeepBench V100" for r in first_layer)
    assert all(r["on"] == "fwd+bwd_filter" for r in first_layer)
    one_rank = [r for r in rows if r["operation"] == "all_reduce" and r["ranks"] == "1"]
    assert one_rank and all(r["GB/s"] == "" and r["fastest"] == "" for r in one_rank)


def test_short_unique_labels() -> None:
    from dataclasses import replace

    from deepbench.runner.analysis.sources import short_device, short_labels

    assert short_device("NVIDIA H100 80GB HBM3") == "H100" and short_device("AMD Instinct MI300X") == "MI300X"
    assert short_device("synthetic device") is None
    h100 = Source("20261125-111338-nvidia-train", "run", (), {"device.name": "NVIDIA H100 80GB HBM3"}, {}, path="a")
    other = replace(h100, path="b")
    synthetic = Source("my-run", "run", (), {"device.name": "synthetic device"}, {})
    named = replace(h100, label="mine", named=True)
    assert [s.label for s in short_labels([h100, other, synthetic, named])] == ["H100 A", "H100 B", "my-run", "mine"]
    from deepbench.runner.errors import UserError

    with pytest.raises(UserError, match="named the same"):
        short_labels([named, named])


@pytest.mark.skipif(not (PUBLISHED / "nvidia-h200" / "train").exists(), reason="published runs not in this tree")
def test_compare_without_labels_names_the_devices() -> None:
    p = run_cli(
        "deepbench",
        "compare",
        str(PUBLISHED / "nvidia-h100" / "train"),
        str(PUBLISHED / "nvidia-h200" / "train"),
        "--format",
        "csv",
        "--allow-unlike",
    )
    assert p.returncode == 0, p.stderr
    header = next(csv.reader(io.StringIO(p.stdout)))
    assert "H100 (us)" in header and "H200 vs H100" in header


def test_flags_are_named_in_fastest_and_compare_rows() -> None:
    from dataclasses import replace

    from deepbench.runner.render.compare_render import compare_tables

    sources = _sources()
    h200 = sources[1]
    flagged_conv = replace(h200.entries[0], flags=("noisy", "unconverged"))
    sources[1] = replace(h200, entries=(flagged_conv, *h200.entries[1:]))
    conv = next(t for t in fastest_tables(sources) if t.op == "conv")
    assert _row(conv, n="8")["note"] == "H200 noisy, unconverged"
    table = next(t for t in compare_tables(compare(sources[:2])) if t.op == "conv")
    assert _row(table, n="8")["note"] == "H200 noisy, unconverged"


# ----- like with like by default (issue 58) -----------------------------------------------------------------------
def _specs(source_: Source, **specs: str) -> Source:
    return replace(source_, specs={**source_.specs, **specs})


def test_compare_names_what_differs_and_leaves_one_rank_collectives_out_of_its_geomeans() -> None:
    gemm = by_id()["gemm/train/020"]
    a = _specs(source("A", "run", run_entry(gemm, {"fwd": 100.0}), run_entry(ALL_REDUCE, {"in_place": 10.0}, 1)))
    b = _specs(source("B", "run", run_entry(gemm, {"fwd": 50.0}), run_entry(ALL_REDUCE, {"in_place": 1.0}, 1)))
    a, b = _specs(a, **{"library.cuDNN": "9.19"}), _specs(b, **{"library.cuDNN": "9.20", "run.backend": "torch"})
    cmp = compare([a, b])
    (all_ops,) = [s for s in cmp.summary() if s["op"] == "all"]
    assert all_ops["kernels"] == 1 and all_ops["geomean"] == pytest.approx(0.5)  # the one-rank all-reduce left out
    found = {d.key: d for d in cmp.differences}
    assert found["run.backend"].changes_problem and not found["library.cuDNN"].changes_problem
    assert next(d.key for d in cmp.differences) == "run.backend"  # what changes the problem comes first
    assert "backend: unrecorded" in found["run.backend"].text() and "torch (B)" in found["run.backend"].text()
    assert refusal(cmp.differences, "compare").startswith("these runs ran different problems (run.backend")


def test_runs_alike_in_their_problem_are_not_refused() -> None:
    gemm = by_id()["gemm/train/020"]
    a = _specs(
        source("A", "run", run_entry(gemm, {"fwd": 100.0})), **{"run.backend": "mkl", "settings.pad": "deepbench"}
    )
    b = _specs(a, **{"settings.mode": "fast"})
    found = differences([a, b])
    assert [d.key for d in found] == ["settings.mode"] and refusal(found, "compare") == ""
    assert (
        differences([a, source("V100", "reference", run_entry(gemm, {"fwd": 1.0}))]) == []
    )  # a reference is DeepBench's


def record_backend(run: Path) -> str:
    """The backend a run's record names."""
    return json.loads((run / "run.json").read_text())["backend"]


def test_compare_and_fastest_refuse_runs_of_two_backends_unless_allowed(smoke_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(smoke_run, other)
    record = json.loads((other / "run.json").read_text())
    record["backend"] = "onnxruntime"  # the same figures, said to come from another backend: the heading must say so
    (other / "run.json").write_text(json.dumps(record))
    said = f"backend: {record_backend(smoke_run)} (TORCH) vs onnxruntime (ORT)"
    for command in (["compare"], ["fastest"]):
        refused = run_cli("deepbench", *command, f"TORCH={smoke_run}", f"ORT={other}", "--format", "md")
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and not refused.stdout
        allowed = run_cli(
            "deepbench", *command, f"TORCH={smoke_run}", f"ORT={other}", "--format", "md", "--allow-unlike"
        )
        assert allowed.returncode == 0, allowed.stderr
        assert said in allowed.stdout + allowed.stderr
