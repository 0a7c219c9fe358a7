"""Every format version this tool ever wrote is read (kernels/format_versions.py): the fixtures of
each earlier shape (tests/fixtures/formats, cut from the published runs' history) and every
published run load with today's readers; a bundle made before format /2 passes `deepbench check`;
a file of a newer version gets one line saying to upgrade, never a traceback, and is never set aside
as damage; what is written now reads back the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deepbench.kernels.format_versions import (
    UPGRADES,
    V1_BACKEND_SETTINGS,
    FormatVersionError,
    NewerFormat,
    read_model,
    upgrade,
)
from deepbench.kernels.results import (
    PLAN_FILE,
    PLAN_SCHEMA,
    RESULT_SCHEMA,
    RESULTS_FILE,
    RUN_FILE,
    RUN_SCHEMA,
    KernelResult,
    Plan,
    RunRecord,
)
from deepbench.kernels.results_file import REJECTED_FILE, read_bytes, read_results, scan
from deepbench.runner.submission.checker import check_bundle
from deepbench.runner.submission.manifest import write_manifest

from .conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
FORMATS = REPO / "tests" / "fixtures" / "formats"
V1_BUNDLE = FORMATS / "10-149c6a2-bundle"
V1_FOLDERS = sorted(p for p in FORMATS.iterdir() if p.is_dir())
PUBLISHED = REPO / "runner" / "published"
PUBLISHED_FOLDERS = sorted({p.parent for p in PUBLISHED.rglob("results.jsonl*")})
NEWER = {"result": "deepbench.result/3", "run": "deepbench.run/3", "plan": "deepbench.plan/3"}


def newer_line(tag: str) -> str:
    current = {"deepbench.result": RESULT_SCHEMA, "deepbench.run": RUN_SCHEMA, "deepbench.plan": PLAN_SCHEMA}
    version = current[tag.split("/")[0]].split("/")[1]
    return f"written by a newer deepbench ({tag}; this one reads up to /{version}): upgrade deepbench"


def read_folder(folder: Path) -> tuple[list[KernelResult], RunRecord | None, Plan | None]:
    """A run folder read as every command reads it."""
    results = read_results(folder / RESULTS_FILE)
    run = read_model(RunRecord, (folder / RUN_FILE).read_bytes()) if (folder / RUN_FILE).exists() else None
    plan = read_model(Plan, (folder / PLAN_FILE).read_bytes()) if (folder / PLAN_FILE).exists() else None
    return results, run, plan


def test_a_fixture_of_each_earlier_shape_is_there_and_stays_old() -> None:
    """The fixtures are files of format /1 (nobody upgraded them in place), with a result, a run
    record and a plan each at least once, and a README line per folder."""
    assert len(V1_FOLDERS) >= 9
    readme = (FORMATS / "README.md").read_text()
    seen: set[str] = set()
    for folder in V1_FOLDERS:
        assert f"`{folder.name}/`" in readme, folder.name
        for name, tag in (
            (RESULTS_FILE, "deepbench.result/1"),
            (RUN_FILE, "deepbench.run/1"),
            (PLAN_FILE, "deepbench.plan/1"),
        ):
            if (folder / name).exists():
                seen.add(name)
                first = (
                    read_bytes(folder / name).splitlines()[0] if name == RESULTS_FILE else (folder / name).read_bytes()
                )
                assert json.loads(first)["schema_version"] == tag, folder / name
    assert seen == {RESULTS_FILE, RUN_FILE, PLAN_FILE}


@pytest.mark.parametrize("folder", V1_FOLDERS, ids=lambda p: p.name)
def test_every_fixture_loads_with_the_new_readers(folder: Path) -> None:
    results, run, plan = read_folder(folder)
    raw = [json.loads(line) for line in read_bytes(folder / RESULTS_FILE).splitlines() if line.strip()]
    assert [r.id for r in results] == [d["id"] for d in raw] and results
    assert all(r.schema_version == RESULT_SCHEMA for r in results)
    for doc, name in ((run, RUN_FILE), (plan, PLAN_FILE)):
        if doc is None:
            continue
        assert doc.schema_version in (RUN_SCHEMA, PLAN_SCHEMA)
        written = json.loads((folder / name).read_text())["settings"]
        for old, (backend, key) in V1_BACKEND_SETTINGS.items():  # moved where written, absent where not
            options = doc.settings.backend_options.get(backend, {})
            assert (key in options) == (old in written), (name, old)
            if old in written:
                assert options[key] == written[old]
    if plan is not None:  # trimmed to the items of the results kept
        assert {f"{r.kernel.id}/{r.precision.name.value}" for r in results} == {i.id for i in plan.items}


@pytest.mark.skipif(not PUBLISHED_FOLDERS, reason="published runs not in this tree")
@pytest.mark.parametrize("folder", PUBLISHED_FOLDERS, ids=lambda p: str(p.relative_to(PUBLISHED)))
def test_every_published_run_loads_with_the_new_readers(folder: Path) -> None:
    results, run, _plan = read_folder(folder)
    assert results and scan(folder / RESULTS_FILE).clean
    assert run is None or run.state in ("complete", "interrupted", "failed", "running")


@pytest.mark.parametrize("folder", V1_FOLDERS, ids=lambda p: p.name)
def test_what_is_written_now_reads_back_the_same(folder: Path) -> None:
    results, run, plan = read_folder(folder)
    for doc in [*results, run, plan]:
        if doc is None:
            continue
        text = doc.model_dump_json()
        assert json.loads(text)["schema_version"] in (RESULT_SCHEMA, RUN_SCHEMA, PLAN_SCHEMA)
        assert read_model(type(doc), text) == doc
        assert read_model(type(doc), doc.model_dump_json(indent=2)) == doc  # not the fast path


def test_v1_settings_move_under_backend_options() -> None:
    settings = {"seed": 3, "engine_race": "inline", "cudnn_engines": {"*": "eng0"}, "collective_timing": "eager"}
    doc = {"schema_version": "deepbench.plan/1", "settings": settings}
    out = upgrade(doc, PLAN_SCHEMA)
    assert out["schema_version"] == PLAN_SCHEMA
    assert out["settings"]["backend_options"] == {
        "cudnn": {"engine_race": "inline", "engines": {"*": "eng0"}},
        "nccl": {"collective_timing": "eager"},
    }
    assert doc["settings"] is settings and "backend_options" not in settings  # the caller's dict is untouched
    bare = upgrade({"schema_version": "deepbench.run/1", "settings": {"seed": 3}}, RUN_SCHEMA)
    assert "backend_options" not in bare["settings"]  # absent keys stay absent: the defaults apply
    assert upgrade({"schema_version": "deepbench.result/1", "id": "x"}, RESULT_SCHEMA) == {
        "schema_version": RESULT_SCHEMA,
        "id": "x",
    }


def test_each_format_has_a_step_per_earlier_version() -> None:
    for tag in (RESULT_SCHEMA, RUN_SCHEMA, PLAN_SCHEMA):
        family, version = tag.split("/")
        assert len(UPGRADES[family]) == int(version) - 1


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"id": "x"}, "has no schema_version: not a deepbench plan file"),
        ({"schema_version": "deepbench.run/1"}, "'deepbench.run/1' is not a deepbench plan format"),
        ({"schema_version": "deepbench.plan/0"}, "is not a deepbench plan format (this one reads deepbench.plan/1 to"),
        ({"schema_version": 2}, "is not a deepbench plan format"),
        ([1, 2], "is not a JSON object (found list), not a deepbench plan"),
    ],
)
def test_no_or_another_tag_is_a_clear_error(doc: object, words: str) -> None:
    with pytest.raises(FormatVersionError) as caught:
        read_model(Plan, json.dumps(doc), "plan.json")
    assert not isinstance(caught.value, NewerFormat)
    assert str(caught.value).startswith("plan.json: ") and words in str(caught.value)


def _newer_copy(tmp_path: Path, which: str) -> Path:
    """The last /1 fixture, copied, with one document (of results: the first line) tagged as a newer version."""
    folder = tmp_path / "run"
    shutil.copytree(FORMATS / "09-2bb1f84-last", folder)
    path = folder / {"result": RESULTS_FILE, "run": RUN_FILE, "plan": PLAN_FILE}[which]
    docs = (
        [json.loads(line) for line in path.read_text().splitlines()]
        if which == "result"
        else [json.loads(path.read_text())]
    )
    docs[0]["schema_version"] = NEWER[which]
    path.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    return folder


def test_a_newer_result_is_one_line_and_never_set_aside(tmp_path: Path) -> None:
    folder = _newer_copy(tmp_path, "result")
    before = (folder / RESULTS_FILE).read_bytes()
    with pytest.raises(NewerFormat, match=r"^results\.jsonl: written by a newer deepbench \(deepbench\.result/3;"):
        read_results(folder / RESULTS_FILE)
    proc = run_cli("deepbench", "report", str(folder))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].endswith(newer_line(NEWER["result"])), proc.stderr
    assert (folder / RESULTS_FILE).read_bytes() == before and not (folder / REJECTED_FILE).exists()


@pytest.mark.parametrize("which", ["run", "plan"])
def test_a_newer_run_or_plan_is_one_line(tmp_path: Path, which: str) -> None:
    folder = _newer_copy(tmp_path, which)
    name = RUN_FILE if which == "run" else PLAN_FILE
    with pytest.raises(NewerFormat) as caught:
        read_model(RunRecord if which == "run" else Plan, (folder / name).read_bytes(), name)
    assert str(caught.value) == f"{name}: {newer_line(NEWER[which])}"
    if which == "run":  # deepbench report reads run.json (the plan is read by submit and resume)
        proc = run_cli("deepbench", "report", str(folder))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and newer_line(NEWER[which]) in proc.stderr, proc.stderr


def test_check_accepts_a_bundle_made_before_format_2(tmp_path: Path) -> None:
    """A bundle `deepbench submit` wrote at 149c6a2, formats /1 throughout: it passes, and the
    provenance hashes of that older code are a warning (not verifiable), not a problem."""
    bundle = tmp_path / "bundle"
    shutil.copytree(V1_BUNDLE, bundle)
    assert json.loads((bundle / RUN_FILE).read_text())["schema_version"] == "deepbench.run/1"
    proc = run_cli("deepbench", "check", str(bundle), env={"COLUMNS": "400"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "check passed" in out and "Traceback" not in out, out
    assert "provenance hashes are not verifiable" in out and "writing deepbench.run/1" in out, out


def test_check_names_a_newer_document_in_a_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(V1_BUNDLE, bundle)
    plan = json.loads((bundle / PLAN_FILE).read_text())
    (bundle / PLAN_FILE).write_text(json.dumps({**plan, "schema_version": NEWER["plan"]}))
    write_manifest(bundle)
    report = check_bundle(bundle)
    assert f"{PLAN_FILE}: {newer_line(NEWER['plan'])}" in [str(p) for p in report.problems]


def test_resume_continues_a_run_of_format_1(tmp_path: Path) -> None:
    """A run folder of the /1 bundle with its last result missing: --resume measures it, appending
    a /2 line after the /1 one, and every reader takes the mixed file."""
    folder = tmp_path / "run"
    folder.mkdir()
    for name in (PLAN_FILE, RUN_FILE):
        shutil.copy(V1_BUNDLE / name, folder / name)
    first, *_ = (V1_BUNDLE / RESULTS_FILE).read_bytes().splitlines(keepends=True)
    (folder / RESULTS_FILE).write_bytes(first)
    proc = run_cli("deepbench-run", "--resume", str(folder), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = (folder / RESULTS_FILE).read_bytes().splitlines()
    assert [json.loads(x)["schema_version"] for x in lines] == ["deepbench.result/1", RESULT_SCHEMA]
    results, run, plan = read_folder(folder)
    assert run is not None and run.state == "complete" and run.schema_version == RUN_SCHEMA
    assert plan is not None and {r.id for r in results} == {i.id for i in plan.items}


def test_resume_refuses_a_run_record_of_a_newer_format(tmp_path: Path) -> None:
    folder = _newer_copy(tmp_path, "run")
    before = (folder / RUN_FILE).read_bytes()
    proc = run_cli("deepbench-run", "--resume", str(folder))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].endswith(newer_line(NEWER["run"])), proc.stderr
    assert (folder / RUN_FILE).read_bytes() == before
