"""`deepbench check` trusts no byte (issue 21, case 7): numbers and booleans written as strings,
an `ok` result whose check failed or whose error is far over its tolerance, an inflated
tolerance, edited rates or flags, results outside the run's segments, a plan that is not the one
the run started with, source hashes that are not this version's, and a results file of one huge
line (read with bounded memory). Then a property-based fuzz test (hypothesis): single-site
mutations of a valid bundle, the manifest re-hashed as a forger would, must never raise and
never be accepted (a sample made zero or negative among them); random byte damage must never raise
(and without a re-hashed manifest, never be accepted).

    DEEPBENCH_FUZZ_EXAMPLES=10000 python -m pytest tests/test_checker_strict.py -k fuzz   # the long run
"""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepbench.kernels.results import TimeStats
from deepbench.runner.submission.checker import Report, bounded_lines, check_bundle
from deepbench.runner.submission.layout import MANIFEST, Limits
from deepbench.runner.submission.manifest import write_manifest

from .conftest import run_cli

# CI runs a bounded number of cases; the long run (10,000+) is for a quiet machine: see the docstring.
FUZZ_EXAMPLES = int(os.environ.get("DEEPBENCH_FUZZ_EXAMPLES", "60"))
DOCS = ("run.json", "plan.json", "system.json", "host_system.json", "submission.json")
# Subtrees the schemas leave free-form (dict[str, Any]: library facts, device and host facts, the
# image's labels): a string there is not a type error.
FREE_FORM = {"info", "device", "host", "image", "labels"}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("strict")
    run = root / "run"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "smoke",
        "--ops",
        "gemm,rnn",
        "--fast",
        "--threads",
        "1",
        "--quiet",
        "--out",
        str(run),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bundle = root / "bundle"
    proc = run_cli("deepbench", "submit", str(run), "--out", str(bundle), "--submitter", "CI", "--system-name", "CI VM")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return bundle


@pytest.fixture(scope="module")
def base_warnings(base: Path) -> set[str]:
    report = check_bundle(base)
    assert report.ok, [str(p) for p in report.problems]
    return {str(w) for w in report.warnings}


def accepted(report: Report, base_warnings: set[str]) -> bool:
    """Passed, with no warning the untouched bundle did not have (as --strict would judge it)."""
    return report.ok and {str(w) for w in report.warnings} <= base_warnings


def load(bundle: Path) -> dict[str, Any]:
    docs: dict[str, Any] = {name: json.loads((bundle / name).read_text()) for name in DOCS}
    docs["results.jsonl"] = [json.loads(x) for x in (bundle / "results.jsonl").read_text().splitlines()]
    return docs


def save(bundle: Path, docs: dict[str, Any], name: str) -> None:
    """Write the one document changed, then re-hash the manifest (a careful forger's last step)."""
    if name == "results.jsonl":
        (bundle / name).write_text("".join(json.dumps(r) + "\n" for r in docs[name]))
    else:
        (bundle / name).write_text(json.dumps(docs[name], indent=1) + "\n")
    write_manifest(bundle)


def copy_of(base: Path, tmp: Path) -> Path:
    dst = tmp / f"b{len(list(tmp.iterdir()))}"
    shutil.copytree(base, dst)
    return dst


def problems(bundle: Path) -> str:
    report = check_bundle(bundle)
    text = "\n".join(str(p) for p in report.problems)
    assert "could not be completed" not in text, text  # a checker step that tripped: a bug
    return text


def first_ok(docs: dict[str, Any]) -> dict:
    return next(r for r in docs["results.jsonl"] if r["status"] == "ok")


# ----- case 7, one by one ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda r: r["time_us"].__setitem__("median", str(r["time_us"]["median"])), "time_us.median: Input should be"),
        (lambda r: r["check"].__setitem__("passed", "true"), "check.passed: Input should be a valid boolean"),
        (
            lambda r: r["parts"][0]["measurement"].__setitem__("calls_per_sample", 1.0),
            "Input should be a valid integer",
        ),
        (lambda r: r["parts"][0]["check"].__setitem__("passed", False), "an ok result cannot hold a failed check"),
        (
            lambda r: [p["check"].__setitem__("error", p["check"]["tolerance"] * 5000) for p in r["parts"]],
            "passed with error",
        ),
        (lambda r: [p["check"].__setitem__("tolerance", 0.5) for p in r["parts"]], "is above the"),
        (lambda r: r["parts"][0].__setitem__("gbps", r["parts"][0]["gbps"] * 2), "gbps"),
        (lambda r: r.__setitem__("tflops", r["tflops"] * 2), "tflops"),
        # "noisy" turned over: set where the samples say quiet, or taken away where they say noisy (a loaded machine)
        (
            lambda r: r.__setitem__(
                "flags", [f for f in r["flags"] if f != "noisy"] if "noisy" in r["flags"] else [*r["flags"], "noisy"]
            ),
            "flag",
        ),
        (lambda r: r.__setitem__("started_at", "2001-01-01T00:00:00Z"), "lie outside the run's segments"),
    ],
)
def test_wrong_results_are_problems(base: Path, tmp_path: Path, edit, words: str) -> None:
    bundle = copy_of(base, tmp_path)
    docs = load(bundle)
    edit(first_ok(docs))
    save(bundle, docs, "results.jsonl")
    assert words in problems(bundle)


def test_plan_must_be_the_one_the_run_started_with(base: Path, tmp_path: Path) -> None:
    bundle = copy_of(base, tmp_path)
    docs = load(bundle)
    docs["plan.json"]["command"] = "edited"  # nothing else looks at the command
    save(bundle, docs, "plan.json")
    assert "is not the plan the run started with" in problems(bundle)


@pytest.mark.parametrize("key", ["harness_sha256", "runner_sha256"])
def test_source_hashes_must_be_this_versions(base: Path, tmp_path: Path, key: str) -> None:
    bundle = copy_of(base, tmp_path)
    docs = load(bundle)
    prov = docs["run.json"]["provenance"]
    prov[key] = "0" * 64
    for part in ("source", "harness_source"):  # a clean tree: no excuse for another hash
        if prov.get(part):
            prov[part].update(state="clean", changed=[], changed_count=0)
    save(bundle, docs, "run.json")
    assert f"provenance.{key} 0000000000000000... is not what deepbench" in problems(bundle)


def test_another_releases_hashes_are_not_verifiable(base: Path, tmp_path: Path, monkeypatch) -> None:
    """A bundle of another release of this tool (one RELEASES names) cannot have its hashes compared: a
    warning says so. (A version no release had is another matter: tests/test_checker_issue57.py.)"""
    from deepbench.runner.submission import provenance_checks

    monkeypatch.setattr(provenance_checks, "RELEASES", ("0.0.1", *provenance_checks.RELEASES))
    bundle = copy_of(base, tmp_path)
    docs = load(bundle)
    docs["run.json"]["tool_version"] = docs["run.json"]["provenance"]["tool_version"] = "0.0.1"
    docs["run.json"]["provenance"]["harness_sha256"] = "0" * 64  # that release's code, not this one's
    save(bundle, docs, "run.json")
    report = check_bundle(bundle)
    assert report.ok, [str(p) for p in report.problems]
    assert any("not verifiable" in str(w) for w in report.warnings)


def test_one_huge_line_is_read_in_bounded_memory(base: Path, tmp_path: Path) -> None:
    """A line over the per-record limit is skipped a chunk at a time, never held whole."""
    limit, size = 1 << 20, 64 << 20
    stream = io.BytesIO(b"{" + b" " * size + b"}\n" + b'{"next": 1}\n')
    tracemalloc.start()
    lines = list(bounded_lines(stream, limit))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert lines == [(1, None), (2, b'{"next": 1}\n')]
    assert peak < 4 * limit, peak
    bundle = copy_of(base, tmp_path)
    with (bundle / "results.jsonl").open("ab") as f:
        f.write(b"[" + b"1," * 300_000 + b"1]\n")
    write_manifest(bundle)
    report = check_bundle(bundle, Limits(max_json_bytes=100_000))
    assert any("line" in p.where and "is over 100000 bytes" in p.message for p in report.problems)


def test_reformatted_documents_are_still_accepted(base: Path, tmp_path: Path, base_warnings: set[str]) -> None:
    """The fuzz test's control: re-serialising the results (key order kept) changes nothing."""
    bundle = copy_of(base, tmp_path)
    save(bundle, load(bundle), "results.jsonl")
    assert accepted(check_bundle(bundle), base_warnings)


# ----- fuzz ------------------------------------------------------------------------------------------
def leaves(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() if k not in FREE_FORM for leaf in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in leaves(v, (*path, i))]
    return [(path, value)]


def at(doc: Any, path: tuple) -> tuple[Any, Any]:
    for key in path[:-1]:
        doc = doc[key]
    return doc, path[-1]


def _scale(doc: Any, path: tuple, factor: float) -> None:
    parent, key = at(doc, path)
    parent[key] = parent[key] * factor


RESULT_NUMBERS = ("samples", "stats", "time_us", "tflops", "gbps")


@st.composite
def wrong_bundles(draw: st.DrawFn, docs: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """(document changed, the documents, what was done): one change a correct checker must reject."""
    docs = copy.deepcopy(docs)
    kind = draw(
        st.sampled_from(
            [
                "stringify",
                "number",
                "result-line",
                "check",
                "required",
                "extra-key",
                "kernel",
                "run-record",
                "timestamp",
                "hash",
                "sign",
            ]
        )
    )
    oks = [i for i, r in enumerate(docs["results.jsonl"]) if r["status"] == "ok"]
    i = draw(st.sampled_from(oks))
    r = docs["results.jsonl"][i]
    factor = draw(st.sampled_from([0.5, 0.9, 0.999, 1.001, 1.1, 2.0, 1e3]))
    if kind == "stringify":
        name = draw(st.sampled_from(["results.jsonl", *DOCS]))
        doc = docs[name][i] if name == "results.jsonl" else docs[name]
        typed = [(p, v) for p, v in leaves(doc) if isinstance(v, (int, float)) and p[-1] != "schema_version"]
        path, value = draw(st.sampled_from(typed))
        parent, key = at(doc, path)
        parent[key] = json.dumps(value) if not isinstance(value, bool) else draw(st.sampled_from(["true", "1"]))
        return name, docs, f"{name} {path} as a string"
    if kind == "number":
        what = draw(st.sampled_from(RESULT_NUMBERS))
        j = draw(st.integers(0, len(r["parts"]) - 1))
        part = r["parts"][j]
        if what == "samples":
            last = len(part["measurement"]["samples_us"]) - 1
            _scale(part, ("measurement", "samples_us", draw(st.integers(0, last))), factor)
        elif what == "stats":
            stat = draw(st.sampled_from(["median", "min", "max", "mean", "p25", "p75"]))
            _scale(part, ("measurement", "stats", stat), factor)
        elif what == "time_us":
            _scale(r, ("time_us", draw(st.sampled_from(["median", "min", "max", "mean", "p25", "p75"]))), factor)
        else:
            target = draw(st.sampled_from([r, part]))
            if target.get(what) is None:
                return "results.jsonl", docs, "nothing"  # filtered below
            _scale(target, (what,), factor)
        return "results.jsonl", docs, f"{r['id']} {what} x{factor}"
    if kind == "result-line":
        lines = docs["results.jsonl"]
        if draw(st.booleans()):
            lines.insert(draw(st.integers(0, len(lines))), copy.deepcopy(r))
            return "results.jsonl", docs, "a duplicated line"
        del lines[i]
        return "results.jsonl", docs, "a dropped line"
    if kind == "check":
        part = draw(st.sampled_from(r["parts"]))
        change = draw(st.sampled_from(["passed", "error", "tolerance", "none"]))
        check = part["check"]
        if change == "passed":
            check["passed"] = False
        elif change == "error":
            check["error"] = check["tolerance"] * draw(st.sampled_from([1.5, 10, 5000])) or 1.0
        elif change == "tolerance":
            check["tolerance"] = max(check["tolerance"], 1e-2) * draw(st.sampled_from([10, 100]))
        else:
            check["error"] = None
        return "results.jsonl", docs, f"check {change}"
    if kind == "required":
        name = draw(st.sampled_from(["results.jsonl", "run.json", "plan.json", "submission.json"]))
        doc = docs[name][i] if name == "results.jsonl" else docs[name]
        required = {
            "results.jsonl": ["id", "kernel", "precision", "backend", "status", "started_at", "ended_at"],
            "run.json": ["run_id", "tool_version", "state", "planned", "settings", "started_at", "ended_at"],
            "plan.json": ["run_id", "suite", "platform", "backend", "settings", "items"],
            "submission.json": ["run_id", "local", "reproduce", "files", "created_at"],
        }[name]
        del doc[draw(st.sampled_from(required))]
        return name, docs, "a required key removed"
    if kind == "extra-key":
        name = draw(st.sampled_from(["results.jsonl", "run.json", "plan.json", "submission.json", "system.json"]))
        doc = docs[name][i] if name == "results.jsonl" else docs[name]
        doc[draw(st.sampled_from(["extra", "speedup", "verified"]))] = draw(st.sampled_from([1, "yes", True]))
        return name, docs, "an unknown key added"
    if kind == "kernel":
        numeric = [k for k, v in r["kernel"].items() if isinstance(v, int) and not isinstance(v, bool)]
        key = draw(st.sampled_from(numeric))
        r["kernel"][key] += draw(st.sampled_from([1, -1, 100]))
        return "results.jsonl", docs, f"kernel.{key} changed"
    if kind == "run-record":
        run = docs["run.json"]
        change = draw(st.sampled_from(["counts", "planned", "state", "seed", "settings", "run_id"]))
        if change == "counts":
            run["counts"]["ok"] = run["counts"].get("ok", 0) + draw(st.sampled_from([1, -1]))
        elif change == "planned":
            run["planned"] += 1
        elif change == "state":
            run["state"] = draw(st.sampled_from(["interrupted", "running", "failed"]))
        elif change == "seed":
            run["provenance"]["seeds"]["inputs"] = 7
        elif change == "settings":
            run["settings"]["min_samples"] += 1
        else:
            run["run_id"] += "-x"
        return "run.json", docs, f"run {change}"
    if kind == "sign":  # a sample made zero or negative, its statistics re-made (issue 57 case 2)
        m = draw(st.sampled_from(r["parts"]))["measurement"]
        j = draw(st.integers(0, len(m["samples_us"]) - 1))
        m["samples_us"][j] = draw(st.sampled_from([0.0, -m["samples_us"][j]]))
        m["stats"] = TimeStats.of(m["samples_us"]).model_dump(mode="json")
        return "results.jsonl", docs, "a sample made zero or negative"
    if kind == "timestamp":
        r[draw(st.sampled_from(["started_at", "ended_at"]))] = draw(
            st.sampled_from(["2001-01-01T00:00:00Z", "2999-01-01T00:00:00Z"])
        )
        return "results.jsonl", docs, "a timestamp moved"
    prov = docs["run.json"]["provenance"]
    prov[draw(st.sampled_from(["harness_sha256", "runner_sha256"]))] = draw(
        st.text("0123456789abcdef", min_size=64, max_size=64)
    )
    return "run.json", docs, "a source hash replaced"


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize="CI" in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_fuzz_single_site_mutations_are_never_accepted(
    data: st.DataObject, base: Path, base_warnings: set[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    docs = load(base)
    name, changed, what = data.draw(wrong_bundles(docs))
    if changed == docs:  # a draw that changed nothing (a rate the result does not have, a hash drawn equal)
        return
    bundle = copy_of(base, tmp_path_factory.mktemp("fuzz"))
    save(bundle, changed, name)
    report = check_bundle(bundle)
    text = "\n".join(str(p) for p in report.problems)
    assert "could not be completed" not in text, (what, text)
    assert not accepted(report, base_warnings), f"accepted a bundle with {what}"


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize="CI" in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzz_damaged_bytes_never_raise(
    data: st.DataObject, base: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Bytes flipped, cut or inserted anywhere: never a traceback; without a re-hashed manifest never
    accepted (the manifest sees it); with one, whatever the checker says, it says it in problems."""
    bundle = copy_of(base, tmp_path_factory.mktemp("bytes"))
    files = sorted(p for p in bundle.rglob("*") if p.is_file())
    path = data.draw(st.sampled_from(files))
    before = path.read_bytes()
    raw = bytearray(before)
    at_ = data.draw(st.integers(0, max(len(raw) - 1, 0)))
    how = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    if how == "flip" and raw:
        raw[at_] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del raw[at_ : at_ + data.draw(st.integers(1, 64))]
    else:
        raw[at_:at_] = data.draw(st.binary(min_size=1, max_size=64))
    if bytes(raw) == before:  # nothing damaged (an empty log cut, a byte inserted equal to itself ...)
        return
    path.write_bytes(bytes(raw))
    rehash = data.draw(st.booleans()) and path.name != MANIFEST
    if rehash:
        write_manifest(bundle)
    report = check_bundle(bundle)  # raising here fails the test
    text = "\n".join(str(p) for p in report.problems)
    assert "could not be completed" not in text, text
    if not rehash:
        assert not report.ok, f"{how} at {at_} in {path.name} passed"
