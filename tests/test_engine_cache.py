"""The engine cache (kernels/backends/cudnn/engine_cache.py over contract/find_db.py): what it is keyed by, that a
warm race races only the cached leaders and chooses as the cold race did, that another library version misses, that
a corrupt or foreign file is refused with one line and the run searches instead, that the shipped db is named when it
served, export and import, the option and the `deepbench cache` command; on the cuDNN test double
(tests/fake_cudnn.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepbench.kernels.backends.contract import find_db
from deepbench.kernels.backends.cudnn import engine_cache
from deepbench.kernels.backends.cudnn.declaration import CUDNN, CudnnOptions, CudnnPartInfo, recorded_engines
from deepbench.kernels.backends.cudnn.engine_cache import KIND, EngineCache, FindDb, entry_key, library_key
from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import KernelResult

pytest.importorskip("torch")

from .fake_cudnn import _library, _Race
from .reports_synthetic import result

H200 = library_key("NVIDIA H200", "9.0", "91900", "1.32.0")
# engine 2 (Winograd nonfused) fastest, engine 0's hidden split-K plan next, then its default
TIMES: dict[int | str, float] = {2: 10.0, "eng0_k0=43_k2=1": 10.5, "eng0": 12.0, 0: 20.0}


def _cache(folder: Path, library: dict[str, str] = H200, shipped: Path | None = None) -> EngineCache:
    return EngineCache(FindDb(folder, KIND), FindDb(shipped or folder / "none", KIND, writable=False), library)


def _raced(cache: EngineCache | None, times: dict[int | str, float] = TIMES, wrong: frozenset[int] = frozenset()):
    race = _Race(_library(), wrong=set(wrong), times=times, cache=cache)
    chosen, record = race.choose()
    return race, chosen, record


def test_the_key_holds_the_gpu_the_libraries_the_problem_the_precision_the_layout_and_the_direction() -> None:
    kk = by_id()["conv/train/000"]
    key = entry_key(kk, Precision.FP16, "NHWC", "bwd_data")
    assert key.startswith("fp16/nhwc/bwd_data/") and f"n{kk.n}c{kk.c}h{kk.h}w{kk.w}k{kk.k}" in key
    others = {
        entry_key(kk, Precision.FP32, "NHWC", "bwd_data"),
        entry_key(kk, Precision.FP16, "NCHW", "bwd_data"),
        entry_key(kk, Precision.FP16, "NHWC", "fwd"),
        entry_key(by_id()["conv/train/001"], Precision.FP16, "NHWC", "bwd_data"),
    }
    assert key not in others and len(others) == 4
    names = {
        find_db.file_name(KIND, H200),
        find_db.file_name(KIND, {**H200, "cudnn": "92000"}),
        find_db.file_name(KIND, {**H200, "cudnn_frontend": "1.33.0"}),
        find_db.file_name(KIND, {**H200, "device": "NVIDIA H100 80GB HBM3"}),
        find_db.file_name(KIND, {**H200, "capability": "10.0"}),
    }
    assert len(names) == 5 and all(n.endswith(".json") and "/" not in n for n in names)


def test_a_warm_race_races_only_the_cached_leaders_and_chooses_as_the_cold_one(tmp_path: Path) -> None:
    cold_race, cold, cold_record = _raced(_cache(tmp_path))
    assert cold.name == "eng2" and cold_record["engine_from"] == "race"
    assert cold_record["engine_cache"]["recorded"] and cold_record["engine_cache"]["source"] == ""
    warm_race, warm, warm_record = _raced(_cache(tmp_path))
    assert warm.name == cold.name and warm_record["engine_from"] == "cache"
    leaders = warm_record["engine_cache"]["leaders"]
    assert leaders == engine_cache.LEADERS and len(warm_race.screened_names) == leaders
    assert len(cold_race.screened_names) > leaders  # the cold race drew the whole search
    assert warm_race.timed_names[0] == "eng2" and set(warm_race.timed_names) <= set(cold_race.timed_names)
    assert warm_record["family"] == cold_record["family"] and warm_record["search"]["enumerated"] == leaders
    assert warm_race.passes == []  # no search at all
    info = CudnnPartInfo.model_validate({"cudnn": warm_record})
    assert info.cudnn.engine_from == "cache" and info.cudnn.engine_cache is not None
    assert info.cudnn.engine_cache.source.endswith(".json") and info.cudnn.engine_cache.leaders == leaders


def test_a_warm_race_keeps_the_rank_rule_between_leaders_within_the_margin(tmp_path: Path) -> None:
    """Two leaders within 1%: the one the search offers first wins, cold and warm alike."""
    times: dict[int | str, float] = {2: 10.05, "eng0_k2=1": 10.0, 0: 30.0}  # eng0_k2=1: the heuristics' first
    _, cold, _ = _raced(_cache(tmp_path), times)
    _, warm, warm_record = _raced(_cache(tmp_path), times={**times, "eng0_k2=1": 10.08})
    assert cold.name == warm.name == "eng0_k2=1" and warm_record["engine_from"] == "cache"


def test_another_library_version_misses(tmp_path: Path) -> None:
    _raced(_cache(tmp_path))
    for other in ({**H200, "cudnn": "92000"}, {**H200, "cudnn_frontend": "1.33.0"}, {**H200, "device": "NVIDIA B200"}):
        race, _, record = _raced(_cache(tmp_path, other))
        assert record["engine_from"] == "race" and race.passes == [False]  # searched whole
        assert "warning" not in record["engine_cache"]
    assert len(list(tmp_path.glob("*.json"))) == 4  # one file per library key, none crossed


@pytest.mark.parametrize(
    "spoil, says",
    [
        (lambda p: p.write_text("{not json"), "corrupt"),
        (lambda p: p.write_text(json.dumps({"format": "deepbench.find-db/1", "kind": KIND})), "not a deepbench"),
        (lambda p: p.write_text(p.read_text().replace('"91900"', '"90100"')), "foreign"),
        (lambda p: p.write_text(p.read_text().replace(f'"{KIND}"', '"miopen-solutions"')), "foreign"),
    ],
)
def test_a_corrupt_or_foreign_file_is_refused_with_one_line_and_the_run_searches(tmp_path: Path, spoil, says) -> None:
    _raced(_cache(tmp_path))
    (path,) = tmp_path.glob("*.json")
    spoil(path)
    spoiled = path.read_text()
    cache = _cache(tmp_path)
    race, chosen, record = _raced(cache)
    note = record["engine_cache"]
    assert chosen.name == "eng2" and record["engine_from"] == "race" and race.passes == [False]
    assert says in note["warning"] and "\n" not in note["warning"] and str(path) in note["warning"]
    assert not note["recorded"] and path.read_text() == spoiled  # left as it is for the user
    assert cache.warnings() and says in cache.warnings()[0]


def test_an_entry_that_is_not_one_is_refused_and_searched(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    key = entry_key(by_id()["conv/train/000"], Precision.FP32, "NCHW", "fwd")
    assert cache.record(key, engine_cache.Entry([engine_cache.Leader("eng2", 2, {}, 1, 10.0)])) == ""
    doc = json.loads(next(tmp_path.glob("*.json")).read_text())
    doc["entries"][key]["leaders"] = []
    next(tmp_path.glob("*.json")).write_text(json.dumps(doc))
    _, _, record = _raced(_cache(tmp_path))
    assert record["engine_from"] == "race" and "is not one" in record["engine_cache"]["warning"]


def test_leaders_that_no_longer_build_or_compute_correctly_are_searched_whole(tmp_path: Path) -> None:
    _raced(_cache(tmp_path))
    library = _library()
    del library[2]  # the cached winner's engine no longer serves the graph
    race = _Race(library, wrong=set(), times=TIMES, cache=_cache(tmp_path))
    chosen, record = race.choose()
    assert record["engine_from"] == "cache" and chosen.name == "eng0_k0=43_k2=1"  # the runner-up leads now
    race = _Race(_library(), wrong={2, 0}, times=TIMES, cache=_cache(tmp_path))
    chosen, record = race.choose()
    assert record["engine_from"] == "race" and "computed this direction correctly" in record["engine_cache"]["missed"]
    assert race.passes == [False, True] and chosen.name == "eng4"  # the runtime-compiled pass, as cold


def test_the_shipped_db_serves_where_the_user_has_none_and_is_named(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped"
    _raced(_cache(shipped))  # filled as a GPU sitting fills it (export, then import into the package's folder)
    user = tmp_path / "user"
    race, chosen, record = _raced(_cache(user, shipped=shipped))
    assert record["engine_from"] == "system-db" and str(shipped) in record["engine_cache"]["source"]
    assert chosen.name == "eng2" and len(race.screened_names) == engine_cache.LEADERS
    assert record["engine_cache"]["recorded"]  # the user's db records every find: it takes precedence next time
    _, _, again = _raced(_cache(user, shipped=shipped))
    assert again["engine_from"] == "cache" and str(user) in again["engine_cache"]["source"]
    assert FindDb(shipped, KIND, writable=False).record(H200, "k", {"leaders": []}).endswith("read only")


def test_off_is_no_cache_and_every_direction_is_searched() -> None:
    assert EngineCache.open("off", H200) is None
    race, _, record = _raced(None)
    assert record["engine_from"] == "race" and "engine_cache" not in record and race.passes == [False]


def test_export_and_import_round_trip(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    _raced(_cache(here))
    _raced(_cache(here, {**H200, "device": "NVIDIA H100 80GB HBM3"}))
    out = tmp_path / "lab.json"
    entries, refused = find_db.export([FindDb(here, KIND)], out)
    assert entries == 2 and refused == []
    done = find_db.import_document(find_db.read_export(out), {KIND: FindDb(there, KIND)})
    assert (done.added, done.kept, done.files) == (2, 0, 2)
    assert sorted(p.name for p in there.glob("*.json")) == sorted(p.name for p in here.glob("*.json"))
    for mine in here.glob("*.json"):
        assert json.loads(mine.read_text())["entries"] == json.loads((there / mine.name).read_text())["entries"]
    race, _, record = _raced(_cache(there))
    assert record["engine_from"] == "cache" and len(race.screened_names) == engine_cache.LEADERS
    again = find_db.import_document(find_db.read_export(out), {KIND: FindDb(there, KIND)})
    assert (again.added, again.kept) == (0, 2)  # the folder's own entries kept
    replaced = find_db.import_document(find_db.read_export(out), {KIND: FindDb(there, KIND)}, replace=True)
    assert replaced.replaced == 2
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(find_db.Refusal, match=r"not a deepbench\.find-db-export/1 file"):
        find_db.read_export(tmp_path / "bad.json")


def test_the_user_folder_follows_xdg_cache_home(tmp_path: Path) -> None:
    assert find_db.user_cache_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "deepbench"
    assert find_db.user_cache_folder({}) == Path.home() / ".cache" / "deepbench"
    assert engine_cache.SPEC.user_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "deepbench" / KIND


def test_the_option_writes_back_and_verify_still_pins_the_recorded_plans(tmp_path: Path) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    CUDNN.add_arguments(parser.add_argument_group())
    assert CUDNN.options_from(parser.parse_args([])).engine_cache == ""  # the user's folder
    assert CUDNN.options_from(parser.parse_args(["--engine-cache", "OFF"])).engine_cache == "off"
    folder = CUDNN.options_from(parser.parse_args(["--engine-cache", str(tmp_path / "c")])).engine_cache
    assert folder == str(tmp_path / "c") and CUDNN.to_args(CudnnOptions(engine_cache=folder)) == [
        "--engine-cache",
        folder,
    ]
    assert CUDNN.to_args(CudnnOptions()) == []
    with pytest.raises(SystemExit):
        (tmp_path / "f").write_text("")
        parser.parse_args(["--engine-cache", str(tmp_path / "f")])
    _raced(_cache(tmp_path))
    _, _, warm = _raced(_cache(tmp_path))
    assert warm["engine_from"] == "cache"
    ran = _result_with(warm)  # a submission's engines come along in its results: verify re-runs the same plans
    assert recorded_engines([ran]) == {"conv/train/000/fp32/fwd": "eng2"}
    assert CUDNN.replay(CudnnOptions(), [ran]).engines == {"conv/train/000/fp32/fwd": "eng2"}


def _result_with(record: dict) -> KernelResult:
    """A result whose forward part ran the record's plan (the shape verify's replay reads)."""
    kernel = by_id()["conv/train/000"]
    r = result(kernel, "fp32", lambda d: [10.0] * 5)
    parts = tuple(p.model_copy(update={"info": {"cudnn": record}}) if p.direction == "fwd" else p for p in r.parts)
    return r.model_copy(update={"parts": parts})


def test_the_cache_command_lists_exports_and_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from deepbench.runner.cli import main

    here, there = tmp_path / "here", tmp_path / "there"
    _raced(_cache(here))
    assert main(["cache", "--folder", str(here)]) == 0
    listed = capsys.readouterr().out
    assert f"{KIND}:" in listed and "1 file(s), 1 entries" in listed and "NVIDIA H200" in listed
    out = tmp_path / "lab.json"
    assert main(["cache", "export", str(out), "--folder", str(here)]) == 0
    assert "1 entries" in capsys.readouterr().out
    assert main(["cache", "import", str(out), "--folder", str(there)]) == 0
    assert "1 entries added" in capsys.readouterr().out
    assert main(["cache", "import", str(tmp_path / "missing.json")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_the_router_shows_every_routed_backends_end_of_run_warnings() -> None:
    """The run's device facts come from the router's fallback; a routed backend's warnings (the engine cache's
    refused files) are joined to the fallback's, so the user sees them."""
    import types

    from deepbench.kernels.backends.shared.router import RouterBackend

    def facts(**kw: object) -> types.SimpleNamespace:
        return types.SimpleNamespace(device_facts_after=lambda: dict(kw))

    router = RouterBackend.__new__(RouterBackend)
    router.fallback = facts(warnings=["the board throttled"], clock_lock={"held": True})
    router._routed = {"cudnn": facts(warnings=["engine cache: x.json: corrupt"], engine_cache={"folder": "f"})}
    got = router.device_facts_after()
    assert got["warnings"] == ["the board throttled", "engine cache: x.json: corrupt"]
    assert got["engine_cache"] == {"folder": "f"} and got["clock_lock"] == {"held": True}


def test_two_writers_of_one_file_lose_no_entry(tmp_path: Path) -> None:
    """A race apart and a second run on the machine write the same file: each write merges what is there."""
    a, b = FindDb(tmp_path, KIND), FindDb(tmp_path, KIND)
    entry = engine_cache.Entry([engine_cache.Leader("eng2", 2, {}, 1, 10.0)]).stored()
    assert a.record(H200, "k1", entry) == b.record(H200, "k2", entry) == a.record(H200, "k3", entry) == ""
    (path,) = tmp_path.glob("*.json")
    assert sorted(json.loads(path.read_text())["entries"]) == ["k1", "k2", "k3"]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind
