"""`deepbench verify` runs only code the verifier trusts (issue 42): never the image a bundle names,
and only an image of this installation's recipe (its labels and harness hash checked, a hard
refusal otherwise). A container bundle names a hostile image; verify is given a non-deepbench
image and a deepbench-labelled image that is not the verifier's own: both are refused in one line
before anything runs, and no container of any of them was started. (Docker tests: CI starts
dockerd; elsewhere they fail without one, as tests/test_containers.py does.)"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from deepbench.kernels import __version__
from deepbench.runner.launch.images.platform_images import LABEL_HARNESS, LABEL_PLATFORM, LABEL_VERSION
from deepbench.runner.platforms import get_platform
from deepbench.runner.submission.checker import check_bundle
from deepbench.runner.submission.manifest import write_manifest

from .conftest import local_bundle, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
EXIT_USAGE = 2


@pytest.fixture(scope="module")
def client(docker_client):
    return docker_client


def _image(client, tag: str, labels: dict[str, str]) -> str:
    """A one-file image with these labels (made here, nothing pulled); returns its id."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        entry = tarfile.TarInfo("run.sh")
        script = b"#!/bin/sh\necho forged > /results/forged\n"
        entry.size, entry.mode = len(script), 0o755
        tar.addfile(entry, io.BytesIO(script))
    repo, name = tag.rsplit(":", 1)
    client.api.import_image_from_data(
        data.getvalue(), repository=repo, tag=name, changes=[f"LABEL {k}={v}" for k, v in labels.items()]
    )
    return client.images.get(tag).id


@pytest.fixture(scope="module")
def hostile(client):
    """A non-deepbench image and a deepbench-labelled one (this platform and version) whose harness
    is not this installation's: what a submitter would like the verifier to run."""
    made = {
        "plain": _image(client, f"deepbench-test/plain:{os.getpid()}", {}),
        "labelled": _image(
            client,
            f"deepbench-test/labelled:{os.getpid()}",
            {LABEL_PLATFORM: "cpu", LABEL_VERSION: __version__, LABEL_HARNESS: "0" * 64},
        ),
    }
    yield {k: f"deepbench-test/{k}:{os.getpid()}" for k in made} | {f"{k}_id": v for k, v in made.items()}
    for image_id in made.values():
        client.images.remove(image_id, force=True)


@pytest.fixture(scope="module")
def container_bundle(tmp_path_factory: pytest.TempPathFactory, hostile: dict[str, str]) -> Path:
    """A real run's bundle, re-made as a container run on the hostile image (the image, digest and
    index changed together, the manifest re-hashed): it passes check, so only verify's own rule
    keeps the image from running."""
    bundle = local_bundle(
        tmp_path_factory.mktemp("vimg"), "--suite", "smoke", "--ops", "gemm", "--fast", "--threads", "1", "--quiet"
    )
    image_id = hostile["labelled_id"]
    record = json.loads((bundle / "run.json").read_text())
    record["provenance"].update(
        local=False,
        image_digest=image_id,
        image={"tag": hostile["labelled"], "id": image_id, "digest": image_id, "repo_digests": [], "tags": []},
    )
    (bundle / "run.json").write_text(json.dumps(record, indent=1) + "\n")
    index = json.loads((bundle / "submission.json").read_text())
    index.update(local=False, image_digest=image_id, image={"id": image_id, "archive": None, "registry": None})
    (bundle / "submission.json").write_text(json.dumps(index, indent=1) + "\n")
    write_manifest(bundle)
    report = check_bundle(bundle, allow_modified=True)
    assert report.ok, [str(p) for p in report.problems]
    return bundle


def _containers_of(client, image_ids: list[str]) -> list[str]:
    return [c.id for c in client.containers.list(all=True) if c.image.id in image_ids]


@pytest.mark.parametrize(
    "which, words",
    [
        ("plain", "is not a deepbench image"),
        ("labelled", "holds another deepbench harness"),
    ],
)
def test_verify_refuses_an_image_that_is_not_its_own(
    client, hostile: dict[str, str], container_bundle: Path, tmp_path: Path, which: str, words: str
) -> None:
    out = tmp_path / "again"
    proc = run_cli(
        "deepbench", "verify", str(container_bundle), "--allow-modified", "--image", hostile[which], "--out", str(out)
    )
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert "--force-image" not in lines[0]  # no way around it
    assert not (out / "results.jsonl").exists()
    assert _containers_of(client, [hostile["plain_id"], hostile["labelled_id"]]) == []


def test_verify_never_takes_the_bundles_image_for_its_own(
    client, hostile: dict[str, str], container_bundle: Path, tmp_path: Path
) -> None:
    """The hostile labelled image under the platform's own tag (as if the verifier had it): the
    default path checks it as strictly and refuses it; the bundle's image id is never run."""
    own = get_platform("cpu").image
    if any(own in (i.tags or []) for i in client.images.list()):
        pytest.skip(f"{own} is a real image here: not re-tagged by a test")
    client.images.get(hostile["labelled"]).tag(*own.rsplit(":", 1))
    try:
        proc = run_cli("deepbench", "verify", str(container_bundle), "--allow-modified", "--out", str(tmp_path / "o"))
    finally:
        client.images.remove(own)
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert "holds another deepbench harness" in proc.stderr, proc.stderr
    assert _containers_of(client, [hostile["labelled_id"]]) == []
