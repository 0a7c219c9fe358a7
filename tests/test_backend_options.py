"""Backends' own options (kernels/backends/contract/declaration.py, runner/backend_options.py): the cuDNN and
collective flags go from the command line to Settings.backend_options and back, plans written before
they moved there still load, and the runner names no library."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from deepbench.kernels.backends.collectives.declaration import COLLECTIVES
from deepbench.kernels.backends.cudnn.declaration import CUDNN
from deepbench.kernels.format_versions import read_model
from deepbench.kernels.results import Plan, RunRecord, Settings

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "runner" / "published"
# Data the runner keeps, not code: published runs and DeepBench's reference tables name libraries.
RUNNER_DATA = (REPO / "runner" / "published", REPO / "runner" / "data" / "references")


def _parser() -> argparse.ArgumentParser:
    from deepbench.runner.launch.running.request import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def _request(*argv: str):  # -> RunRequest
    from deepbench.runner.launch.running.request import parse_request

    return parse_request(list(argv), _parser())


def test_the_backends_flags_land_in_their_options_and_are_written_back() -> None:
    from deepbench.runner.backend_options import backend_args
    from deepbench.runner.platforms import get_platform

    flags = [
        "--engine-race",
        "inline",
        "--cudnn-engine",
        "eng34_k2=3",
        "--cudnn-engine",
        "conv/train/052/fp32/bwd_filter=34:TILE_SIZE=3",
        "--collective-timing",
        "eager",
        "--nccl-comm-config",
        "nccl-defaults",
        "--layout",
        "both",
    ]
    settings = _request("--local", *flags).settings(get_platform("nvidia"))
    assert settings.backend_options == {
        "cudnn": {
            "engine_race": "inline",
            "engines": {"*": "eng34_k2=3", "conv/train/052/fp32/bwd_filter": "34:TILE_SIZE=3"},
            "engine_cache": "",
            "layout": "both",
        },
        "nccl": {"collective_timing": "eager", "comm_config": "nccl-defaults"},
    }
    again = _request("--local", *backend_args(settings)).settings(get_platform("nvidia"))
    assert again.backend_options == settings.backend_options


def test_a_plan_records_the_options_of_the_backends_it_runs_on_and_only_those() -> None:
    from deepbench.runner.platforms import get_platform

    request = _request("--local")
    nvidia = request.settings(get_platform("nvidia"), "nvidia")  # it hands convolutions to cudnn
    assert nvidia.backend_options == {
        "cudnn": {"engine_race": "apart", "engines": {}, "engine_cache": "", "layout": "deepbench"}
    }
    assert request.settings(get_platform("cpu"), "torch").backend_options == {}
    assert request.settings(get_platform("nvidia"), "nccl").backend_options == {
        "nccl": {"collective_timing": "graph", "comm_config": "nccl-tests"}
    }


def test_a_malformed_engine_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["--cudnn-engine", "engine34"])
    assert exc.value.code == 2 and "malformed cuDNN engine" in capsys.readouterr().err


def test_a_layout_outside_the_choices_is_a_usage_error_and_help_explains_them(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["--layout", "nwhc"])
    assert exc.value.code == 2 and "--layout: invalid choice: 'nwhc'" in capsys.readouterr().err
    text = " ".join(_parser().format_help().split())
    assert "--layout {deepbench,nchw,nhwc,both}" in text and "layout penalty (NCHW time over NHWC time" in text


def test_a_plan_with_a_layout_outside_the_choices_is_refused_by_the_options_model() -> None:
    from deepbench.kernels.backends.contract.declaration import BackendOptionsError

    with pytest.raises(BackendOptionsError, match=r"backend_options\.cudnn\.layout: Input should be 'deepbench'"):
        CUDNN.options_of(Settings(backend_options={"cudnn": {"layout": "NCHW_VECT_C"}}))
    assert CUDNN.options_of(Settings()).layout == "deepbench"  # absent (plans written before it): DeepBench's


def test_the_layout_goes_back_to_the_command_line_only_where_it_is_not_the_default() -> None:
    assert CUDNN.to_args(CUDNN.options.model_validate({"layout": "nchw"})) == ["--layout", "nchw"]
    assert "--layout" not in CUDNN.to_args(CUDNN.options.model_validate({}))


def test_settings_written_before_the_move_load_into_backend_options() -> None:
    old = {"engine_race": "inline", "cudnn_engines": {"*": "eng1"}, "collective_timing": "eager", "seed": 3}
    plan = {"schema_version": "deepbench.plan/1", "run_id": "r", "suite": "train", "platform": "nvidia"}
    plan |= {"backend": "nvidia", "settings": old, "items": []}
    settings = read_model(Plan, json.dumps(plan)).settings  # format /1: kernels/format_versions.py moves them
    assert settings.backend_options == {
        "cudnn": {"engine_race": "inline", "engines": {"*": "eng1"}},
        "nccl": {"collective_timing": "eager"},
    }
    assert CUDNN.options_of(settings).engines == {"*": "eng1"}
    assert COLLECTIVES.options_of(settings).collective_timing == "eager"
    assert COLLECTIVES.options_of(settings).comm_config == "nccl-defaults"  # what runs before the option did
    assert CUDNN.options_of(Settings()).engine_race == "apart"  # absent: the defaults


@pytest.mark.parametrize("path", sorted(PUBLISHED.rglob("plan.json")), ids=lambda p: str(p.relative_to(PUBLISHED)))
def test_every_published_plan_and_run_loads_with_its_backend_options(path: Path) -> None:
    plan = read_model(Plan, path.read_text())
    recorded = json.loads(path.read_text())["settings"]
    if "engine_race" in recorded:
        assert CUDNN.options_of(plan.settings).engine_race == recorded["engine_race"]
    if "collective_timing" in recorded:
        assert COLLECTIVES.options_of(plan.settings).collective_timing == recorded["collective_timing"]
    run = path.with_name("run.json")
    if run.exists():
        assert read_model(RunRecord, run.read_text()).settings.backend_options == plan.settings.backend_options


def test_the_runner_names_no_library_outside_its_data() -> None:
    named = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "runner").rglob("*"))
        if p.is_file() and not any(p.is_relative_to(d) for d in RUNNER_DATA) and b"cudnn" in p.read_bytes().lower()
        if p.suffix != ".pyc"
    ]
    assert not named, f"runner files that name cuDNN (its backend declares what the runner needs): {named}"
