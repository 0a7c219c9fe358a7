"""The rules an image is made and run by, without building one: the locks (complete, hashed,
current with their inputs and with deepbench's declared requirements), a fresh lock made by uv,
the --image label and version check, the container's user and its default limits."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from deepbench.kernels import __version__
from deepbench.kernels.provenance import harness_sha256
from deepbench.runner.errors import UserError
from deepbench.runner.launch.images import image_lock, platform_images
from deepbench.runner.launch.images.container import FALLBACK_USER, container_user, run_options
from deepbench.runner.launch.images.container_options import DEFAULT_PIDS_LIMIT
from deepbench.runner.platforms import PLATFORMS, get_platform

from .conftest import REPO

IMAGE_DIRS = sorted({p.image_dir for p in PLATFORMS.values()})
# deepbench's extras each image serves; its base image brings the rest (the vendors' PyTorch and numpy).
EXTRAS = {"intel": ("torch", "mpi"), "arm": ("tflite", "onnxruntime", "acl"), "nvidia": ("nvidia",), "amd": ()}
FROM_BASE = {"nvidia": {"numpy", "torch"}, "amd": {"numpy", "torch"}}
# The runner reads locks with packaging; an image holds it only as another package's dependency (onnxruntime's).
RUNNER_ONLY = image_lock.HOST_ONLY | {"packaging"}


def _platform(image_dir: str):
    return next(p for p in PLATFORMS.values() if p.image_dir == image_dir)


@pytest.mark.parametrize("image_dir", IMAGE_DIRS)
def test_lock_is_complete_hashed_and_current(image_dir: str) -> None:
    platform = _platform(image_dir)
    pins = image_lock.read_lock(image_lock.lock_path(platform))
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for p in pins for h in p.hashes)
    assert len({p.name for p in pins}) == len(pins)
    assert image_lock.stale(platform) == []


@pytest.mark.parametrize("image_dir", IMAGE_DIRS)
def test_lock_meets_deepbench_declared_requirements(image_dir: str) -> None:
    """pyproject's requirements of the harness and of the image's extras hold for the locked
    versions (the host-only libraries excepted): an image and `pip install deepbench[...]` agree."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in EXTRAS[image_dir]:
        declared += project["optional-dependencies"][extra]
    pins = {p.name: p.version for p in image_lock.read_lock(image_lock.lock_path(_platform(image_dir)))}
    for spec in declared:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        if name in image_lock.HOST_ONLY:
            assert name not in pins, f"{image_dir} locks {name}, a host-only library"
            continue
        if name in RUNNER_ONLY or name in FROM_BASE.get(image_dir, set()):
            continue
        assert name in pins, f"{image_dir}: {spec} is not locked"
        assert req.specifier.contains(pins[name], prereleases=True), f"{image_dir}: {spec} vs {pins[name]}"


def test_a_lock_whose_input_moved_is_stale(tmp_path: Path, monkeypatch) -> None:
    import shutil

    from deepbench.runner.launch.images import image_sources

    shutil.copytree(REPO / "images" / "nvidia", tmp_path / "nvidia")
    monkeypatch.setattr(image_sources, "IMAGES_DIR", tmp_path)
    nvidia = get_platform("nvidia")
    with (tmp_path / "nvidia" / image_lock.INPUT_FILE).open("a") as f:
        f.write("pydantic>=99\nrich\n")
    assert image_lock.stale(nvidia) == [
        next(
            f"pydantic>=99 is not met by the lock's pydantic=={p.version}"
            for p in image_lock.read_lock(tmp_path / "nvidia" / image_lock.LOCK_FILE)
            if p.name == "pydantic"
        ),
        "rich is not in the lock",
    ]


def test_uv_locks_with_hashes_for_the_image_interpreter(tmp_path: Path) -> None:
    """A fresh lock from requirements.in (the registry is reached: CI reaches it), every pin
    hashed (read_lock refuses one without), resolved for the image's CPython (uv.toml)."""
    out = image_lock.lock(get_platform("nvidia"), out=tmp_path / "requirements.lock", log=lambda line: None)
    text = out.read_text()
    assert "deepbench images lock --platform nvidia" in text.splitlines()[1]
    pins = {p.name: p for p in image_lock.read_lock(out)}
    assert {"pydantic", "pydantic-core", "setuptools"} <= set(pins)
    assert image_lock.stale(get_platform("nvidia"), out) == []


def _image(labels: dict) -> SimpleNamespace:
    return SimpleNamespace(labels=labels)


OURS = {
    platform_images.LABEL_PLATFORM: "intel",
    platform_images.LABEL_VERSION: __version__,
    platform_images.LABEL_HARNESS: harness_sha256(),
}


@pytest.mark.parametrize(
    "labels, words",
    [
        ({}, "is not a deepbench image"),
        ({**OURS, platform_images.LABEL_PLATFORM: "arm"}, "for arm, not intel"),
        ({**OURS, platform_images.LABEL_VERSION: "0.0.1"}, "holds deepbench 0.0.1"),
    ],
)
def test_image_check_refuses_unless_forced(labels: dict, words: str) -> None:
    intel = get_platform("intel")
    with pytest.raises(UserError, match=words) as err:
        platform_images.check_image(_image(labels), "some/image:1", intel, own=False)
    assert "--force-image" in str(err.value)
    said = []
    platform_images.check_image(_image(labels), "some/image:1", intel, own=False, force=True, log=said.append)
    assert said and said[0].startswith("warning:") and words in said[0]


def test_image_check_harness_source() -> None:
    cpu = get_platform("cpu")  # runs the intel image
    platform_images.check_image(_image(OURS), "deepbench/cpu:x", cpu, own=True)
    other = {**OURS, platform_images.LABEL_HARNESS: "0" * 64}
    with pytest.raises(UserError, match="another deepbench harness"):
        platform_images.check_image(_image(other), "deepbench/cpu:x", cpu, own=True)
    said = []
    platform_images.check_image(_image(other), "mine:1", cpu, own=False, log=said.append)
    assert "another deepbench harness" in said[0]


def test_container_user_is_never_root(monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert container_user("10001:10001") == "10001:10001"
    assert container_user("10001") == "10001:10001"
    for user in ("", "root", "0", "0:0", "deepbench"):
        assert container_user(user) == FALLBACK_USER
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: 1000)
    assert container_user("10001:10001") == "1000:1000"


def test_default_limits_and_overrides(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    intel = get_platform("intel")
    opts = run_options(intel, "sha256:x", plan, tmp_path)
    host_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert opts["pids_limit"] == DEFAULT_PIDS_LIMIT and 0.5 * host_bytes < int(opts["mem_limit"]) < host_bytes
    assert opts["memswap_limit"] == opts["mem_limit"] and opts["user"] == FALLBACK_USER
    opts = run_options(intel, "sha256:x", plan, tmp_path, memory="none", pids_limit=0)
    assert "mem_limit" not in opts and "pids_limit" not in opts
    opts = run_options(intel, "sha256:x", plan, tmp_path, memory="2g", pids_limit=64)
    assert opts["mem_limit"] == "2g" and opts["pids_limit"] == 64
    with pytest.raises(UserError, match="--memory takes a size"):
        run_options(intel, "sha256:x", plan, tmp_path, memory="lots")
