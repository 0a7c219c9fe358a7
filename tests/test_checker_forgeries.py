"""`deepbench check` recomputes what it can (issues 42 and 57): semantic forgeries of a real bundle,
each made consistent as a careful forger would make it (rates re-derived from the forged FLOPs and
bytes, statistics from the forged samples, flags from the forged measurements, the total time and
counts re-summed, plan and run settings changed together, the manifest and plan hash re-made), are
never accepted. KINDS holds how each kind is made: costs, directions, labels, settings, `ok` made
`unsupported` with any text or with a reason its backend gives but not for that kernel, stop reasons
the samples contradict, samples after the stop, zero and negative samples, samples called stalled,
flags turned over, the device swapped, the out-of-place twin edited. The bundle is made once; each
forgery is a mutation of its documents in memory, loaded and judged by the checker's own steps
(check_documents; the manifest is left out as a forger would have re-hashed it:
test_forgery_through_files shows the same verdict through the files).

    DEEPBENCH_FORGERIES=10000 (the default) python -m pytest tests/test_checker_forgeries.py
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepbench.kernels.results import (
    CHECK_METHODS,
    PLAN_SCHEMA,
    RESULT_FLAGS,
    RESULT_SCHEMA,
    RUN_SCHEMA,
    STOP_REASONS,
    TIMER_METHODS,
    KernelResult,
    Plan,
    RunRecord,
    TimeStats,
)
from deepbench.runner.setting_ranges import RANGES
from deepbench.runner.submission.checker import Bundle, Report, _validate, check_bundle, check_documents
from deepbench.runner.submission.manifest import write_manifest

from .conftest import local_bundle, run_cli

FORGERIES = int(os.environ.get("DEEPBENCH_FORGERIES", "10000"))
NOWHERE = Path("/nonexistent-bundle")  # no plan.json to hash: the forger re-made plan_sha256

# The forgeries below give the torch backend's own reasons, so the bundle is the torch backend's.
TORCH_SMOKE = ("--suite", "smoke", "--backend", "torch", "--fast", "--threads", "1", "--quiet")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return local_bundle(tmp_path_factory.mktemp("forge"), *TORCH_SMOKE)


@pytest.fixture(scope="module")
def docs(base: Path) -> dict[str, Any]:
    report = check_bundle(base, allow_modified=True)  # a test tree may hold uncommitted changes
    assert report.ok, [str(p) for p in report.problems]
    b = report.bundle
    texts = {
        "plan": (base / "plan.json").read_text(),
        "run": (base / "run.json").read_text(),
        "results": [x for x in (base / "results.jsonl").read_text().splitlines() if x.strip()],
    }
    return {
        "bundle": b,
        "texts": texts,
        "plan": json.loads(texts["plan"]),
        "run": json.loads(texts["run"]),
        "results": [json.loads(x) for x in texts["results"]],
        "valid": {},
    }


def judge(docs: dict[str, Any], plan: dict, run: dict, results: list[dict]) -> Report:
    """The checker's verdict on forged documents (loaded as check_bundle loads them)."""
    report = Report(NOWHERE, allow_modified=True)
    base: Bundle = docs["bundle"]
    b = Bundle(index=base.index, system=base.system, host_system=base.host_system)
    b.plan = _validate(Plan, plan, PLAN_SCHEMA, "plan.json", report)
    b.run = _validate(RunRecord, run, RUN_SCHEMA, "run.json", report)
    b.results = [x for x in (_load_result(docs, r, report) for r in results) if x is not None]
    b.results_valid = len(b.results) == len(results)
    check_documents(b, report)
    return report


def _load_result(docs: dict[str, Any], record: dict, report: Report) -> KernelResult | None:
    """A record as the checker loads it; an unchanged one is loaded once (the same JSON, the same
    model: only the forged record costs a validation)."""
    key = json.dumps(record, sort_keys=True)
    if key not in docs["valid"]:
        loaded = _validate(KernelResult, record, RESULT_SCHEMA, "results.jsonl", report)
        if loaded is None:
            return None
        docs["valid"][key] = loaded
    return docs["valid"][key]


def test_untouched_documents_pass(docs: dict[str, Any]) -> None:
    """What makes the property meaningful: the same path accepts the real documents."""
    report = judge(docs, docs["plan"], docs["run"], docs["results"])
    assert report.ok, [str(p) for p in report.problems]


# ----- a forger's edits, each re-made consistent --------------------------------------------------------
def _rates(r: dict) -> None:
    """Re-derive every rate and the total from the parts, as the harness writes them."""
    for p in r["parts"]:
        med = p["measurement"]["stats"]["median"]
        p["tflops"] = p["flops"] / med / 1e6 if p["flops"] else None
        p["gbps"] = p["min_bytes"] / med / 1e3 if p["min_bytes"] else None
    total = TimeStats.total(TimeStats.model_validate(p["measurement"]["stats"]) for p in r["parts"])
    r["time_us"] = total.model_dump(mode="json")
    flops = sum(p["flops"] for p in r["parts"])
    nbytes = sum(p["min_bytes"] for p in r["parts"])
    r["tflops"] = flops / total.median / 1e6 if flops else None
    r["gbps"] = nbytes / total.median / 1e3 if nbytes else None
    if r["check"] not in [p["check"] for p in r["parts"]]:
        r["check"] = r["parts"][0]["check"]


def _counts(run: dict, results: list[dict]) -> None:
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    run["counts"] = counts


def _reflag(r: dict) -> None:
    """The flags that follow from the measurements, re-made as a forger re-makes them (result_flags.py)."""
    from pydantic import ValidationError

    from deepbench.kernels.result_flags import due_flags
    from deepbench.kernels.results import PartResult

    try:
        r["flags"] = list(due_flags([PartResult.model_validate(p) for p in r["parts"]]))
    except ValidationError:
        pass  # parts no reader accepts (a negative sample): their flags do not matter


@dataclass
class Draft:
    """One forgery being made: the documents, the result and part it starts from, and Hypothesis's draw."""

    draw: st.DrawFn
    plan: dict
    run: dict
    results: list[dict]
    r: dict
    part: dict

    @property
    def oks(self) -> list[dict]:
        return [r for r in self.results if r["status"] == "ok"]

    def factor(self) -> float:
        return self.draw(st.one_of(st.floats(0.01, 0.999), st.floats(1.001, 100.0), st.sampled_from([0.5, 2.0, 10.0])))

    def label(self) -> str:
        return self.draw(st.text(min_size=1, max_size=20))


def _costs(d: Draft, key: str) -> None:
    if d.part[key] == 0:
        d.part[key] = d.draw(st.floats(1.0, 1e12))
    else:
        d.part[key] *= d.factor()
    _rates(d.r)


def _drop_direction(d: Draft) -> None:
    r = d.draw(st.sampled_from([x for x in d.oks if len(x["parts"]) > 1]))
    r["parts"].pop(d.draw(st.integers(0, len(r["parts"]) - 1)))
    _rates(r)


def _rename_direction(d: Draft) -> None:
    others = ["fwd", "bwd", "bwd_data", "bwd_filter", "in_place", "out_of_place", d.label()]
    d.part["direction"] = d.draw(st.sampled_from([x for x in others if x != d.part["direction"]]))
    _rates(d.r)  # a duplicate direction made this way is kept: also a forgery


def _unsupported(d: Draft, reason: str) -> None:
    for key in ("time_us", "tflops", "gbps", "check"):
        d.r[key] = None
    d.r.update(status="unsupported", reason=reason, parts=[], flags=[])
    _counts(d.run, d.results)


def _any_reason(d: Draft) -> None:
    reason = d.draw(
        st.one_of(
            st.text(min_size=1, max_size=80),
            st.sampled_from(
                [
                    "PyTorch has no int8 recurrent layer with 32-bit accumulate",
                    "onnxruntime has no sparse matrix product among the standard ONNX operators",
                    "fp8 GEMM needs an NVIDIA GPU of compute capability 8.9 or newer (cuBLASLt fp8)",
                    "TFLite has no builtin GRU operator",
                    "cublasGemmEx has no fp32 GEMM",
                ]
            ),
        )
    )
    _unsupported(d, reason)


def _reason_that_cannot_apply(d: Draft) -> None:
    """A reason the torch backend's code does give, but not for this kernel and precision (issue 57 case 4)."""
    op, precision = d.r["op"], d.r["precision"]["name"]
    reasons = [
        f"{op} is not run by the torch backend on one process",  # every smoke operation is run by it
        "this language model has no embedding table to draw token ids from",  # a whole model's
        f"PyTorch has no {precision} recurrent layer with 32-bit accumulate",  # not fp32's, nor another op's
    ]
    if not (d.r["kernel"].get("a_t") or d.r["kernel"].get("b_t")):
        reasons.append("transposed sparse operands are not in DeepBench's sparse sets")
    _unsupported(d, d.draw(st.sampled_from(reasons)))


def _stop_reason_label(d: Draft) -> None:
    labels = st.sampled_from(["converged-ish", "stopped", "CONVERGED", d.label()])
    d.part["measurement"]["stop_reason"] = d.draw(labels.filter(lambda x: x not in STOP_REASONS))


def _stop_reason_claim(d: Draft) -> None:
    """Another of the stop reasons this tool gives, the flags re-made to match: the samples say otherwise."""
    m = d.part["measurement"]
    m["stop_reason"] = d.draw(st.sampled_from([x for x in STOP_REASONS if x != m["stop_reason"]]))
    _reflag(d.r)


def _samples_after_the_stop(d: Draft) -> None:
    """Samples appended to a part that converged (statistics, rates and flags re-made): the rule had stopped."""
    r = d.draw(st.sampled_from([x for x in d.oks if any(_converged_cpu(p) for p in x["parts"])]))
    m = d.draw(st.sampled_from([p for p in r["parts"] if _converged_cpu(p)]))["measurement"]
    extra = d.draw(st.lists(st.sampled_from(m["samples_us"]), min_size=1, max_size=50))
    m["samples_us"] = [*m["samples_us"], *extra]
    m["stats"] = TimeStats.of(m["samples_us"]).model_dump(mode="json")
    _rates(r)
    _reflag(r)


def _converged_cpu(p: dict) -> bool:
    return p["measurement"]["stop_reason"] == "converged" and p["measurement"]["method"] == "cpu-perf-counter"


def _not_positive(d: Draft) -> None:
    """A sample made zero or negative (issue 57 case 2), the statistics and rates re-made."""
    m = d.part["measurement"]
    i = d.draw(st.integers(0, len(m["samples_us"]) - 1))
    m["samples_us"][i] = d.draw(st.sampled_from([0.0, -m["samples_us"][i], -1e-9]))
    m["stats"] = TimeStats.of(m["samples_us"]).model_dump(mode="json")
    _rates(d.r)
    _reflag(d.r)


def _stalled_claim(d: Draft) -> None:
    """A sample called stalled (left out of the statistics) that the stall rule does not find."""
    m = d.part["measurement"]
    if len(m["samples_us"]) < 2:
        m["samples_us"] = [*m["samples_us"], m["samples_us"][0]]
    i = d.draw(st.integers(0, len(m["samples_us"]) - 1))
    m["stalled"] = [i]
    m["stats"] = TimeStats.of([x for j, x in enumerate(m["samples_us"]) if j != i]).model_dump(mode="json")
    _rates(d.r)
    _reflag(d.r)


def _flag_turned(d: Draft) -> None:
    """A flag this tool sets, turned over: set where its measurements say not, or taken away."""
    from deepbench.kernels.result_flags import FLAG_ORDER

    flag = d.draw(st.sampled_from(FLAG_ORDER))
    d.r["flags"] = [f for f in d.r["flags"] if f != flag] if flag in d.r["flags"] else [*d.r["flags"], flag]


def _device_swap(d: Draft) -> None:
    """The plan's and the run's device swapped (issue 57 case 3)."""
    device = d.draw(st.sampled_from(["cuda", "cuda:0", "cuda:1"]))
    for doc in (d.plan, d.run):
        doc["settings"]["device"] = device


def _out_of_place(d: Draft) -> None:
    """The all-reduce's out-of-place twin edited (issue 57 case 5): its median, its samples (statistics
    re-made), a figure of its info, or its stop reason."""
    r = next(x for x in d.oks if x["op"] == "all_reduce")
    twin = r["info"]["out_of_place"]
    m = twin["measurement"]
    what = d.draw(st.sampled_from(["median", "samples", "algbw_gbps", "time_max_over_ranks_us", "stop_reason"]))
    if what == "median":
        m["stats"]["median"] *= d.factor()
    elif what == "samples":
        m["samples_us"] = [x * d.factor() for x in m["samples_us"]]
        m["stats"] = TimeStats.of(m["samples_us"]).model_dump(mode="json")
    elif what == "stop_reason":
        m["stop_reason"] = d.draw(st.sampled_from([x for x in STOP_REASONS if x != m["stop_reason"]]))
    else:
        twin["info"][what] *= d.factor()


def _timer(d: Draft) -> None:
    # not any timer this tool has: Hypothesis also draws text from the string constants of the modules
    # loaded, so a label can be a real one ("cuda-graph-events"), which is no forgery
    labels = st.sampled_from(["wall-clock", "fake", d.label()])
    d.part["measurement"]["method"] = d.draw(labels.filter(lambda x: x not in TIMER_METHODS))


def _check_method(d: Draft) -> None:
    labels = st.sampled_from(["eyeballed", "none", d.label()])
    d.part["check"]["method"] = d.draw(labels.filter(lambda x: x not in CHECK_METHODS))
    d.r["check"] = d.r["parts"][0]["check"]


def _flag_unknown(d: Draft) -> None:
    labels = st.sampled_from(["fast", "verified", d.label()])
    d.r["flags"] = [*d.r["flags"], d.draw(labels.filter(lambda x: x not in RESULT_FLAGS))]


def _negative_error(d: Draft) -> None:
    d.part["check"]["error"] = -d.draw(st.floats(1e-12, 1.0))
    d.r["check"] = d.r["parts"][0]["check"] if d.r["check"] is not None else None
    _rates(d.r)


def _setting(d: Draft) -> None:
    """A setting outside the command line's range, in the plan and the run alike."""
    name = d.draw(st.sampled_from(sorted(RANGES)))
    bound = RANGES[name]
    value: float = d.draw(
        st.one_of(
            st.floats(bound.high * 1.01 + 1, bound.high * 1e6 + 10),
            st.just(bound.low - 1 if not bound.low_open else bound.low),
        )
    )
    if name in ("seed", "ranks", "min_samples", "max_samples"):
        value = int(min(value, 2**62))
        if value <= bound.high and value >= bound.low:
            value = int(bound.high) + 1
    for doc in (d.plan, d.run):
        doc["settings"][name] = value
    if name == "seed":
        d.run["provenance"]["seeds"]["inputs"] = value


# Each kind of forgery: how it is made from a draft (every one must be refused).
KINDS: dict[str, Callable[[Draft], None]] = {
    "flops": lambda d: _costs(d, "flops"),
    "bytes": lambda d: _costs(d, "min_bytes"),
    "drop_direction": _drop_direction,
    "duplicate_direction": lambda d: (d.r["parts"].append(copy.deepcopy(d.part)), _rates(d.r)),
    "rename_direction": _rename_direction,
    "unsupported": _any_reason,
    "reason_cannot_apply": _reason_that_cannot_apply,
    "stop_reason": _stop_reason_label,
    "stop_reason_claim": _stop_reason_claim,
    "samples_after_the_stop": _samples_after_the_stop,
    "not_positive": _not_positive,
    "stalled_claim": _stalled_claim,
    "timer": _timer,
    "check_method": _check_method,
    "flag": _flag_unknown,
    "flag_turned": _flag_turned,
    "negative_error": _negative_error,
    "setting": _setting,
    "device_swap": _device_swap,
    "out_of_place": _out_of_place,
}


@st.composite
def forgery(draw: st.DrawFn, docs: dict[str, Any]) -> tuple[str, dict, dict, list[dict]]:
    plan, run = json.loads(docs["texts"]["plan"]), json.loads(docs["texts"]["run"])
    results = [json.loads(t) for t in docs["texts"]["results"]]
    kind = draw(st.sampled_from(sorted(KINDS)))
    r = draw(st.sampled_from([x for x in results if x["status"] == "ok"]))
    KINDS[kind](Draft(draw, plan, run, results, r, draw(st.sampled_from(r["parts"]))))
    return kind, plan, run, results


@pytest.fixture(scope="module")
def tally() -> dict[str, int]:
    return {}


@pytest.mark.slow  # 10,000 forgeries: 2.5 minutes on a shared 2-core VM (DEEPBENCH_FORGERIES=1000: 20 s)
def test_no_semantic_forgery_is_accepted(docs: dict[str, Any], tally: dict[str, int]) -> None:
    @settings(
        max_examples=FORGERIES, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(forgery(docs))
    def property_(forged: tuple[str, dict, dict, list[dict]]) -> None:
        kind, plan, run, results = forged
        report = judge(docs, plan, run, results)
        text = "\n".join(str(p) for p in report.problems)
        assert "could not be completed" not in text, text
        assert not report.ok, f"{kind} forgery accepted"
        tally[kind] = tally.get(kind, 0) + 1

    property_()
    assert sum(tally.values()) >= FORGERIES
    assert set(tally) == set(KINDS), tally


def test_forgery_through_files(base: Path, tmp_path: Path) -> None:
    """The same verdict through check_bundle: doubled FLOPs with the rates re-derived and the
    manifest re-hashed, and a result of several directions (smoke's: an RNN's fwd and bwd on a CPU) kept
    to its first."""
    for edit in ("flops", "drop"):
        bundle = tmp_path / edit
        shutil.copytree(base, bundle)
        results = [json.loads(x) for x in (bundle / "results.jsonl").read_text().splitlines() if x.strip()]
        r = next(x for x in results if x["status"] == "ok" and (edit == "flops" or len(x["parts"]) >= 2))
        if edit == "flops":
            r["parts"][0]["flops"] *= 2
        else:
            del r["parts"][1:]
        _rates(r)
        (bundle / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in results))
        write_manifest(bundle)
        report = check_bundle(bundle, allow_modified=True)
        text = "\n".join(str(p) for p in report.problems)
        assert not report.ok
        assert ("FLOPs is not what its parameters give" if edit == "flops" else "lacks the direction") in text, text


def test_checker_streams_results(base: Path, tmp_path: Path) -> None:
    """A large results file is checked with bounded memory: the checker holds one record at a time
    (a 443 MB file once cost 1.77 GB held as a list). Here 100 records of 20,000 samples each
    (25-40 MB of JSON): the peak stays a small fraction of the file."""
    import tracemalloc

    from deepbench.kernels.results import TimeStats

    bundle = tmp_path / "big"
    shutil.copytree(base, bundle)
    record = next(
        json.loads(x)
        for x in (bundle / "results.jsonl").read_text().splitlines()
        if json.loads(x)["status"] == "ok" and len(json.loads(x)["parts"]) == 1
    )
    median = record["parts"][0]["measurement"]["stats"]["median"]
    samples = [median * (1 + (i % 7) * 1e-3) for i in range(20_000)]
    record["parts"][0]["measurement"]["samples_us"] = samples
    record["parts"][0]["measurement"]["stats"] = TimeStats.of(samples).model_dump(mode="json")
    _rates(record)
    line = json.dumps(record) + "\n"
    with (bundle / "results.jsonl").open("w") as f:
        for _ in range(100):
            f.write(line)
    size = (bundle / "results.jsonl").stat().st_size
    write_manifest(bundle)
    tracemalloc.start()
    try:
        report = check_bundle(bundle, allow_modified=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert any("has more than one result" in str(p) for p in report.problems)  # it read them all
    # One record at a time peaks at 0.124-0.136 of this 100-record file (measured: the line, its dict and its
    # model live at once; the share moves with how many digits the median prints). Records held as a list
    # cost about 4 times their file (1.77 GB for 443 MB). A quarter of the file lies between the two with
    # room on both sides; an eighth, used before, failed where the median printed short.
    assert peak < size / 4, f"peak {peak / 2**20:.0f} MiB for a {size / 2**20:.0f} MiB results file"


def _forge_files(
    base: Path, dst: Path, edit_plan_settings: dict | None = None, edit_provenance: dict | None = None
) -> Path:
    """A copy of the bundle with plan and run settings (or the run's provenance) changed together,
    plan_sha256 and the manifest re-made: what a careful forger hands over."""
    from deepbench.kernels.provenance import sha256_file

    shutil.copytree(base, dst)
    plan = json.loads((dst / "plan.json").read_text())
    run = json.loads((dst / "run.json").read_text())
    for doc in (plan, run):
        doc["settings"].update(edit_plan_settings or {})
    run["provenance"].update(edit_provenance or {})
    (dst / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    run["plan_sha256"] = sha256_file(dst / "plan.json")
    (dst / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    write_manifest(dst)
    return dst


def test_verify_local_never_runs_settings_outside_the_clis_ranges(base: Path, tmp_path: Path) -> None:
    """Issue 42 case 4: a bundle asking for 100,000 threads and a million-second minimum time: check
    names both, and verify --local refuses before anything runs."""
    bundle = _forge_files(base, tmp_path / "b", {"threads": 100_000, "min_time_s": 1e6})
    report = check_bundle(bundle, allow_modified=True)
    text = "\n".join(str(p) for p in report.problems)
    assert "min_time_s 1e+06 is outside" in text and "threads 100000 is outside" in text, text
    out = tmp_path / "again"
    proc = run_cli(
        "deepbench", "verify", str(bundle), "--local", "--allow-modified", "--out", str(out), env={"COLUMNS": "300"}
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "outside" in proc.stdout + proc.stderr
    assert not (out / "results.jsonl").exists()


def test_a_modified_tree_no_longer_excuses_a_foreign_harness_hash(base: Path, tmp_path: Path) -> None:
    """Issue 42 case 3: a zeroed harness hash in a bundle that declares its tree modified fails
    plain check; --allow-modified accepts it with warnings that say so."""
    source = {
        "state": "modified",
        "commit": "0" * 40,
        "changed": ["kernels/harness/execute.py"],
        "changed_count": 1,
        "reason": "",
    }
    bundle = _forge_files(
        base, tmp_path / "b", edit_provenance={"harness_sha256": "0" * 64, "source": source, "harness_source": source}
    )
    plain = check_bundle(bundle)
    assert any("--allow-modified" in str(p) for p in plain.problems), [str(p) for p in plain.problems]
    allowed = check_bundle(bundle, allow_modified=True)
    assert allowed.ok, [str(p) for p in allowed.problems]
    assert any("modified source tree" in str(w) for w in allowed.warnings)


def test_strict_refuses_unsupported_where_a_published_run_measured_it(
    docs: dict[str, Any], base: Path, tmp_path: Path, monkeypatch
) -> None:
    """An `ok` kernel turned `unsupported` with a reason its backend does give: plain check cannot
    tell, but a published run of this tool measured that kernel on this platform with this backend,
    so check --strict (warnings fail) refuses it."""
    from deepbench.runner.submission import published_ok

    published = tmp_path / "published"
    shutil.copytree(base.parent / "run", published / "cpu" / "smoke")  # this tool's own run, as published
    index = published_ok.decode(published_ok.encode(published_ok.build(published)))  # as --write stores it
    monkeypatch.setattr(published_ok, "shipped", lambda: index)  # the index check reads, in place of the shipped one
    plan, run, results = copy.deepcopy(docs["plan"]), copy.deepcopy(docs["run"]), copy.deepcopy(docs["results"])
    r = next(x for x in results if x["status"] == "ok" and x["op"] == "gemm")
    r.update(
        status="unsupported",
        reason=f"{r['precision']['name']} is not available through PyTorch on cpu",
        parts=[],
        flags=[],
        time_us=None,
        tflops=None,
        gbps=None,
        check=None,
    )
    _counts(run, results)
    report = judge(docs, plan, run, results)
    assert report.ok, [str(p) for p in report.problems]  # a reason the backend gives: plain check passes
    assert any("published run" in str(w) and r["id"] in str(w) for w in report.warnings)
