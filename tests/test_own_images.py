"""Issue 57, case 1, without a daemon: what `deepbench verify` takes for its own image is proven by the
id this machine recorded when it built the image and by the harness read out of it unstarted, never by
labels (runner/launch/images/own_images.py). Docker's objects are stood in for by the few calls the proof
makes (images.get, containers.create, get_archive, remove), so the rule is tried here in full; the same
refusals against a real daemon, with a hostile image that would have written into verify's folder, are
tests/test_verify_images.py's.

- an image with deepbench's labels copied (the true harness hash among them) is refused: the code before
  ran it;
- an image this machine built (recorded by `deepbench images build`) holding this checkout's harness is
  taken, and the container the harness was read from was created and removed, never started;
- recorded but holding other harness files, recorded for another platform's recipe or from another
  harness, not recorded at all: each refused in one line that says how to build one;
- a docker save archive that would give a platform's own tag to an image not built here is refused
  before anything is loaded; the harness copied out is unpacked as plain files only."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from docker.errors import ImageNotFound, NotFound

from deepbench import kernels
from deepbench.kernels import __version__
from deepbench.kernels.provenance import harness_sha256
from deepbench.runner.errors import UserError
from deepbench.runner.launch.images import container, image_archive, own_images, platform_images
from deepbench.runner.platforms import get_platform

CPU = get_platform("cpu")  # the intel image's recipe, as a local bundle's platform names it
FORGED_ID = "sha256:" + "f" * 64
COPIED_LABELS = {
    platform_images.LABEL_PLATFORM: "cpu",
    platform_images.LABEL_VERSION: __version__,
    platform_images.LABEL_HARNESS: harness_sha256(),
}
HARNESS_DIR = Path(kernels.__file__).resolve().parent


def harness_tar(edit: str | None = None, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    """The tar docker's get_archive returns for the image's kernels folder: this checkout's harness, with
    one module's text changed where `edit` says which."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for path in sorted(HARNESS_DIR.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            name = "kernels/" + path.relative_to(HARNESS_DIR).as_posix()
            body = path.read_bytes() + (b"\nimport os  # the forger's\n" if name == edit else b"")
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        for info in extra or []:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return data.getvalue()


@dataclass
class FakeContainer:
    archive: bytes | None
    calls: list[str]

    def get_archive(self, path: str) -> tuple[list[bytes], dict]:
        self.calls.append(f"get_archive {path}")
        if self.archive is None:
            raise NotFound("no such path")
        return [self.archive[i : i + 4096] for i in range(0, len(self.archive), 4096)], {}

    def remove(self, force: bool = False) -> None:
        self.calls.append("remove")


@dataclass
class FakeImage:
    id: str
    labels: dict[str, str]
    tags: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeDocker:
    """images.get and containers.create, as the docker SDK answers them (nothing else is needed)."""

    images_by_ref: dict[str, FakeImage]
    archive: bytes | None = None
    calls: list[str] = field(default_factory=list)
    loaded: list[bytes] = field(default_factory=list)

    @property
    def images(self) -> FakeDocker:
        return self

    @property
    def containers(self) -> FakeDocker:
        return self

    def get(self, ref: str) -> FakeImage:
        if ref not in self.images_by_ref:
            raise ImageNotFound(ref)
        return self.images_by_ref[ref]

    def create(self, image: str, **options: Any) -> FakeContainer:
        self.calls.append(f"create {image} entrypoint={options.get('entrypoint')}")
        return FakeContainer(self.archive, self.calls)

    def load(self, data: Any) -> None:
        self.loaded.append(data.read())


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The build record in a folder of this test's own (never the user's)."""
    monkeypatch.setenv(own_images.STATE_HOME_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


def forged(client_archive: bytes | None = None) -> FakeDocker:
    return FakeDocker({"evil:x": FakeImage(FORGED_ID, COPIED_LABELS, ["evil:x"])}, client_archive)


def test_labels_copied_from_deepbenchs_are_no_proof() -> None:
    client = forged(harness_tar())  # even its harness files are this checkout's
    with pytest.raises(UserError, match="was not built on this machine") as err:
        container._own_image(client, CPU, "evil:x", log=lambda line: None)
    assert "deepbench images build --platform cpu --tag evil:x" in str(err.value)
    assert client.calls == []  # refused on its id: nothing of it was even created


def test_an_image_built_here_with_this_harness_is_taken_without_being_started() -> None:
    client = forged(harness_tar())
    own_images.record_build(FORGED_ID, CPU, "evil:x")
    image, ref = container._own_image(client, CPU, "evil:x", log=lambda line: None)
    assert (image.id, ref) == (FORGED_ID, "evil:x")
    assert client.calls == [
        f"create {FORGED_ID} entrypoint=['/deepbench-never-started']",
        f"get_archive {own_images.HARNESS_IN_IMAGE}",
        "remove",
    ]  # a container that has no start() here: none was started


@pytest.mark.parametrize(
    ("archive", "says"),
    [
        (harness_tar(edit="kernels/harness/__main__.py"), "holds a harness"),
        (None, f"no harness at {own_images.HARNESS_IN_IMAGE}"),
    ],
)
def test_recorded_but_holding_other_harness_files_is_refused(archive: bytes | None, says: str) -> None:
    client = forged(archive)
    own_images.record_build(FORGED_ID, CPU, "evil:x")
    with pytest.raises(UserError, match=says):
        container._own_image(client, CPU, "evil:x", log=lambda line: None)
    assert client.calls[-1] == "remove"


def test_recorded_for_another_recipe_or_harness_is_refused(own_state: Path) -> None:
    client = forged(harness_tar())
    own_images.record_build(FORGED_ID, get_platform("nvidia"), "evil:x")
    with pytest.raises(UserError, match="was built here for nvidia, not cpu"):
        container._own_image(client, CPU, "evil:x", log=lambda line: None)
    own_images.record_build(FORGED_ID, CPU, "evil:x")
    path = own_images.record_path()
    record = json.loads(path.read_text())
    record["images"][FORGED_ID]["harness_sha256"] = "0" * 64  # built from an older checkout
    path.write_text(json.dumps(record))
    with pytest.raises(UserError, match="from another harness"):
        container._own_image(client, CPU, "evil:x", log=lambda line: None)


def test_the_record_keeps_every_build_and_survives_damage(own_state: Path) -> None:
    own_images.record_build("sha256:" + "1" * 64, CPU, "a:1")
    own_images.record_build("sha256:" + "2" * 64, get_platform("arm"), "b:1")
    assert own_images.recorded("sha256:" + "1" * 64) is not None
    assert own_images.recorded("sha256:" + "2" * 64).image_dir == "arm"  # type: ignore[union-attr]
    own_images.record_path().write_text("{not json")
    assert own_images.recorded("sha256:" + "1" * 64) is None  # unreadable: nothing proven, rebuild
    own_images.record_build("sha256:" + "1" * 64, CPU, "a:1")
    assert own_images.recorded("sha256:" + "1" * 64) is not None


def test_a_record_that_cannot_be_written_is_said_not_fatal(own_state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = own_state.parent / "a-file"
    blocked.write_text("x\n")
    monkeypatch.setenv(own_images.STATE_HOME_ENV, str(blocked))  # the state folder's place is a file
    said: list[str] = []
    own_images.record_build(FORGED_ID, CPU, "evil:x", log=said.append)
    assert len(said) == 1 and said[0].startswith("warning: built evil:x") and "verify will not take it" in said[0]
    assert own_images.recorded(FORGED_ID) is None


def test_the_harness_is_unpacked_as_plain_files_only(tmp_path: Path) -> None:
    link = tarfile.TarInfo("kernels/escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    out = tarfile.TarInfo("kernels/../../outside.py")
    out.size = 1
    own_images._unpack([harness_tar(extra=[link, out])], tmp_path / "in")
    assert not (tmp_path / "outside.py").exists() and not (tmp_path / "in" / "kernels" / "escape").exists()
    assert own_images.package_sha256(tmp_path / "in" / "kernels") == harness_sha256()


def save_archive(path: Path, image_id: str, tags: list[str]) -> Path:
    """A docker save archive's manifest (its layers do not matter to what is read before loading)."""
    manifest = json.dumps([{"Config": f"{image_id.removeprefix('sha256:')}.json", "RepoTags": tags, "Layers": []}])
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest.encode()))
    return path


def test_an_archive_that_would_take_a_platforms_own_tag_is_refused_before_loading(tmp_path: Path) -> None:
    archive = save_archive(tmp_path / "submitted.tar", FORGED_ID, [f"docker.io/{CPU.image}"])
    client = FakeDocker({FORGED_ID: FakeImage(FORGED_ID, COPIED_LABELS)})
    with pytest.raises(UserError, match=f"this tool's own name {CPU.image}.*nothing was loaded"):
        image_archive.load(client, archive, FORGED_ID, log=lambda line: None)
    assert client.loaded == []
    own_images.record_build(FORGED_ID, CPU, CPU.image)  # the very image this machine built: it may come back
    assert image_archive.load(client, archive, FORGED_ID, log=lambda line: None).id == FORGED_ID
    other = save_archive(tmp_path / "other.tar", FORGED_ID, ["someone/else:1"])
    assert image_archive.load(client, other, FORGED_ID, log=lambda line: None).id == FORGED_ID
