"""`deepbench verify` runs only code the verifier trusts (issues 42 and 57): never the image a bundle
names, and only an image this machine built from this checkout, proven by the id recorded at its build
and the harness read out of it unstarted, never by its labels (runner/launch/images/own_images.py). A
container bundle names a hostile image; verify is given a non-deepbench image, a deepbench-labelled image
that is not the verifier's own, and (issue 57, case 1) a forged one: deepbench's labels copied with the
true harness hash, this checkout's harness files inside, and an entrypoint that is a shell script writing
into the results folder, which the code before started. Each is refused in one line before anything runs:
no verify folder is made, no container of any of them was created, and nothing was written. The forged
image loaded from an archive under the platform's own tag, as a reviewer's `docker load` of a submitter's
archive leaves it, is refused the same way without --image, and `image_archive.load` refuses to give it
that tag. (Docker tests: CI starts dockerd; elsewhere they skip with one line, as tests/test_containers.py
does.)"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from deepbench import kernels
from deepbench.kernels import __version__
from deepbench.kernels.provenance import harness_sha256
from deepbench.runner.errors import UserError
from deepbench.runner.launch.images import image_archive, own_images
from deepbench.runner.launch.images.platform_images import LABEL_HARNESS, LABEL_PLATFORM, LABEL_VERSION
from deepbench.runner.platforms import get_platform
from deepbench.runner.submission.checker import check_bundle
from deepbench.runner.submission.manifest import write_manifest

from .conftest import local_bundle, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
EXIT_USAGE = 2
NOT_OURS = "was not built on this machine"
WRITES_RESULTS = b"#!/bin/sh\necho forged > /results/forged\n"
HARNESS_DIR = Path(kernels.__file__).resolve().parent


@pytest.fixture(scope="module")
def client(docker_client):
    return docker_client


def _add(tar: tarfile.TarFile, source: Path, name: str) -> None:
    """`source`'s content at `name` in the image (links followed: an imported image has no host to point at)."""
    info = tar.gettarinfo(str(source.resolve()), arcname=name.lstrip("/"))
    with source.resolve().open("rb") as f:
        tar.addfile(info, f)


def _add_shell(tar: tarfile.TarFile) -> None:
    """The host's /bin/sh with the libraries ldd names for it, at the paths it loads them from."""
    sh = Path("/bin/sh")
    listed = subprocess.run(["ldd", str(sh.resolve())], capture_output=True, text=True, check=True).stdout
    for path in {"/bin/sh", *re.findall(r"(/\S+)", listed)}:
        _add(tar, Path(path), path)


def _image(client, tag: str, labels: dict[str, str], *, shell: bool = False, harness: bool = False) -> str:
    """An image made here (nothing pulled) with these labels, whose entrypoint is a script writing into
    the results folder; with `shell`, a shell to run it, with `harness` this checkout's harness where
    deepbench's images hold theirs. Returns its id."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        entry = tarfile.TarInfo("run.sh")
        entry.size, entry.mode = len(WRITES_RESULTS), 0o755
        tar.addfile(entry, io.BytesIO(WRITES_RESULTS))
        if shell:
            _add_shell(tar)
        if harness:
            for path in sorted(HARNESS_DIR.rglob("*.py")) + sorted((HARNESS_DIR / "data").glob("*")):
                if "__pycache__" not in path.parts:
                    _add(tar, path, f"{own_images.HARNESS_IN_IMAGE}/{path.relative_to(HARNESS_DIR).as_posix()}")
    repo, name = tag.rsplit(":", 1)
    changes = [f"LABEL {k}={v}" for k, v in labels.items()] + ['ENTRYPOINT ["/run.sh"]']
    client.api.import_image_from_data(data.getvalue(), repository=repo, tag=name, changes=changes)
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
        "forged": _image(
            client,
            f"deepbench-test/forged:{os.getpid()}",
            {LABEL_PLATFORM: "cpu", LABEL_VERSION: __version__, LABEL_HARNESS: harness_sha256()},
            shell=True,
            harness=True,
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


def _hostile_ids(hostile: dict[str, str]) -> list[str]:
    return [hostile["plain_id"], hostile["labelled_id"], hostile["forged_id"]]


def _written_by_an_image(root: Path) -> list[Path]:
    return list(root.rglob("forged"))


@pytest.mark.parametrize("which", ["plain", "labelled", "forged"])
def test_verify_refuses_an_image_that_is_not_its_own(
    client, hostile: dict[str, str], container_bundle: Path, tmp_path: Path, which: str
) -> None:
    out = tmp_path / "again"
    proc = run_cli(
        "deepbench", "verify", str(container_bundle), "--allow-modified", "--image", hostile[which], "--out", str(out)
    )
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and NOT_OURS in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert "--force-image" not in lines[0] and "deepbench images build --platform cpu" in lines[0]
    assert not out.exists() and _written_by_an_image(tmp_path) == []  # no folder: nothing it could write into
    assert _containers_of(client, _hostile_ids(hostile)) == []  # none created, let alone started


def test_the_forged_image_holds_this_harness_read_without_starting_it(client, hostile: dict[str, str]) -> None:
    """What makes the forgery a forgery is not its files: its harness, read out of a container that is
    created and removed unstarted, is this checkout's; only the build record tells it apart."""
    image = client.images.get(hostile["forged"])
    assert own_images.harness_in(client, image, get_platform("cpu")) == harness_sha256()
    assert _containers_of(client, _hostile_ids(hostile)) == []


def test_verify_never_takes_the_bundles_image_for_its_own(
    client, hostile: dict[str, str], container_bundle: Path, tmp_path: Path
) -> None:
    """The forged image under the platform's own tag, as a reviewer's `docker load` of a submitter's
    archive leaves it: the default path proves it as strictly and refuses it; the bundle's image id is
    never run. `image_archive.load` itself refuses to give the platform's tag to an image not built here."""
    own = get_platform("cpu").image
    if any(own in (i.tags or []) for i in client.images.list()):
        pytest.skip(f"{own} is a real image here: not re-tagged by a test")
    forged = client.images.get(hostile["forged"])
    forged.tag(*own.rsplit(":", 1))
    archive = tmp_path / "submitted.tar"
    try:
        with archive.open("wb") as f:
            for chunk in client.images.get(own).save(named=own):
                f.write(chunk)
    finally:
        client.images.remove(own)
    with pytest.raises(UserError, match=f"this tool's own name {own}"):
        image_archive.load(client, archive, hostile["forged_id"], log=lambda line: None)
    assert not any(own in (i.tags or []) for i in client.images.list())
    with archive.open("rb") as f:
        client.images.load(f.read())  # what `docker load -i submitted.tar` does
    try:
        out = tmp_path / "o"
        proc = run_cli("deepbench", "verify", str(container_bundle), "--allow-modified", "--out", str(out))
    finally:
        client.images.remove(own)
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert NOT_OURS in proc.stderr and f"{own} (" in proc.stderr, proc.stderr
    assert not out.exists() and _written_by_an_image(tmp_path) == []
    assert _containers_of(client, _hostile_ids(hostile)) == []
