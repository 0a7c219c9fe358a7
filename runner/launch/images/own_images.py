"""The images this machine built, and the proof that an image is one of them: what `deepbench verify`
runs, and what an archive must be before `load` may give it one of this tool's own names.

Labels prove nothing: `docker import --change 'LABEL ...'` or a Dockerfile's LABEL writes any of them,
and the harness files a label vouches for are public, so a hostile image can carry deepbench's labels
and its very harness beside an entrypoint of its own (a shell script that wrote into verify's output
folder was started that way). What no one can forge is an image's id: the SHA-256 of its configuration,
which names its entrypoint and every layer's content. So:

- `deepbench images build` (and deepbench-run when it builds an image) records every image it built
  here, by id, with the platform's recipe (images/<vendor>/) and the harness it was built from, in the
  user's state folder (XDG_STATE_HOME/deepbench/built-images.json; ~/.local/state where it is unset),
  which no bundle, archive or image can write;
- an image is this machine's own when its id is recorded there for the platform's recipe with this
  checkout's harness hash, **and** the harness it holds, read out of it without starting it (a created,
  never started container, whose /opt/deepbench-harness/deepbench/kernels is copied out as `docker cp`
  does), hashes as this checkout's (kernels/provenance.py harness_sha256); anything else is refused in
  one line before a folder is made or a container started, naming the build that makes one."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from deepbench.kernels.provenance import harness_sha256, package_sha256
from deepbench.kernels.results import utcnow
from deepbench.kernels.results_file import write_atomic

from ...errors import UserError
from ...platforms import Platform

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

RECORD_SCHEMA: Final = "deepbench.built-images/1"
STATE_HOME_ENV = "XDG_STATE_HOME"
RECORD_FILE = "built-images.json"
MAX_RECORDED = 1000  # the newest builds kept: a build a day for years
# Where install-harness.sh puts deepbench in every platform's image (pip --target), and its harness in it.
HARNESS_IN_IMAGE = "/opt/deepbench-harness/deepbench/kernels"
HARNESS_ARCHIVE_LIMIT = 256 << 20  # the harness is about 4 MB; a copy far beyond it is not ours
CHUNK = 1 << 20


class BuiltImage(BaseModel):
    """One image built here: its platform's recipe and the harness source it was built from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    platform: str
    image_dir: str
    tag: str
    harness_sha256: str
    built_at: datetime


class BuiltImages(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal["deepbench.built-images/1"] = RECORD_SCHEMA
    images: dict[str, BuiltImage] = {}


def record_path() -> Path:
    """The record's file, under the user's state folder (never a cache: losing it means rebuilding)."""
    home = os.environ.get(STATE_HOME_ENV) or str(Path.home() / ".local" / "state")
    return Path(home) / "deepbench" / RECORD_FILE


def _read(path: Path) -> BuiltImages:
    """The record; an unreadable one counts as empty (its images are then not proven: rebuild them)."""
    try:
        return BuiltImages.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return BuiltImages()


def recorded(image_id: str) -> BuiltImage | None:
    """What this machine recorded when it built `image_id`, or None when it did not build it."""
    return _read(record_path()).images.get(image_id)


def record_build(image_id: str, platform: Platform, tag: str, log: Callable[[str], None] = print) -> None:
    """Add an image built here just now (under a lock: two builds at once both stay recorded). A record
    that cannot be written is said, not fatal: the image runs, only verify will not take it."""
    path = record_path()
    try:
        _add(path, image_id, platform, tag)
    except OSError as exc:
        log(
            f"warning: built {tag}, but it could not be recorded in {path} ({exc.strerror or exc}): deepbench "
            "verify will not take it for its own until a build here is recorded"
        )


def _add(path: Path, image_id: str, platform: Platform, tag: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = BuiltImage(
        platform=platform.name,
        image_dir=platform.image_dir,
        tag=tag,
        harness_sha256=harness_sha256(),
        built_at=utcnow(),
    )
    with (path.parent / f".{RECORD_FILE}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = _read(path)
        record.images.pop(image_id, None)
        record.images[image_id] = entry  # the newest last
        kept = list(record.images.items())[-MAX_RECORDED:]
        write_atomic(path, BuiltImages(images=dict(kept)).model_dump_json(indent=1) + "\n")


def _build_hint(platform: Platform, ref: str) -> str:
    tag = "" if ref == platform.image else f" --tag {ref}"
    return (
        f"build it here: deepbench images build --platform {platform.name}{tag} (with --base-image/--wheelhouse "
        "as needed), or verify with --local"
    )


def unproven(image_id: str, ref: str, platform: Platform, ours: str) -> str | None:
    """Why the build record does not prove `image_id` this machine's own build of the platform's
    recipe with this checkout's harness, whose hash is `ours` (None: it does)."""
    entry = recorded(image_id)
    short = f"{ref} ({image_id[:19]})"
    if entry is None:
        return (
            f"{short} was not built on this machine: verify runs only an image deepbench built here, known by "
            "its content id (labels and harness files can be copied into any image); " + _build_hint(platform, ref)
        )
    if entry.image_dir != platform.image_dir:
        return f"{short} was built here for {entry.platform}, not {platform.name}; " + _build_hint(platform, ref)
    if entry.harness_sha256 != ours:
        return (
            f"{short} was built here from another harness ({entry.harness_sha256[:12]}) than this checkout's "
            f"({ours[:12]}); " + _build_hint(platform, ref)
        )
    return None


def _unpack(chunks: Iterable[bytes], into: Path) -> None:
    """The tar stream of a container's folder, unpacked as regular files and folders only (no links,
    no devices, no path out of `into`), within HARNESS_ARCHIVE_LIMIT bytes."""
    with tempfile.TemporaryFile() as spool:
        size = 0
        for chunk in chunks:
            size += len(chunk)
            if size > HARNESS_ARCHIVE_LIMIT:
                raise UserError(f"the image's {HARNESS_IN_IMAGE} is over {HARNESS_ARCHIVE_LIMIT >> 20} MiB: no harness")
            spool.write(chunk)
        spool.seek(0)
        with tarfile.open(fileobj=spool, mode="r:") as tar:
            for member in tar:
                name = PurePosixPath(member.name)
                if name.is_absolute() or ".." in name.parts or not member.isfile():
                    continue
                target = into.joinpath(*name.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is not None:
                    with source, target.open("wb") as out:
                        shutil.copyfileobj(source, out, CHUNK)


def harness_in(client: docker.DockerClient, image: Image, platform: Platform) -> str | None:
    """The harness hash of the files `image` holds at HARNESS_IN_IMAGE, read from a container that is
    created and removed, never started; None when it holds none there."""
    from docker.errors import APIError, NotFound

    try:
        container = client.containers.create(
            image.id,
            entrypoint=["/deepbench-never-started"],
            network_disabled=True,
            labels={"org.deepbench.role": "harness-read"},
            platform=platform.platform_arch,
        )
    except APIError as exc:
        raise UserError(f"cannot read the harness out of {image.id[:19]}: {_first_line(exc)}") from None
    try:
        try:
            chunks, _ = container.get_archive(HARNESS_IN_IMAGE)
        except NotFound:
            return None
        except APIError as exc:
            raise UserError(f"cannot read the harness out of {image.id[:19]}: {_first_line(exc)}") from None
        with tempfile.TemporaryDirectory(prefix="deepbench-harness-") as folder:
            _unpack(chunks, Path(folder))
            root = Path(folder) / PurePosixPath(HARNESS_IN_IMAGE).name
            return package_sha256(root) if root.is_dir() else None
    finally:
        with contextlib.suppress(APIError):
            container.remove(force=True)


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "explanation", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def check_own(client: docker.DockerClient, image: Image, ref: str, platform: Platform) -> None:
    """`image` is this machine's own build of the platform's recipe holding this checkout's harness, or
    a UserError that says which part fails and how to make one. Nothing of the image is started."""
    ours = harness_sha256()  # hashed once: the record and the image's files are both held to it
    why = unproven(image.id, ref, platform, ours)
    if why is not None:
        raise UserError(why)
    found = harness_in(client, image, platform)
    if found != ours:
        held = f"a harness {found[:12]}" if found else f"no harness at {HARNESS_IN_IMAGE}"
        raise UserError(
            f"{ref} ({image.id[:19]}) holds {held}, not this checkout's ({ours[:12]}): " + _build_hint(platform, ref)
        )
