"""An image that travels: written to a file, pushed to a registry, and got back as the very same image.

A run records the image it ran in by id: the SHA-256 of the image's configuration, which names
its layers' content. `docker save` and `docker load` keep that id, and so do a push and a pull by
digest, so whichever way the image comes back, comparing ids says whether it is the same image.
  export   docker save of the image into FILE (.tar; .tar.gz compressed), and FILE.sha256
           beside it (sha256sum -c checks it without deepbench). Docker 25 and later write the
           OCI image layout in it; older daemons their own format. docker load takes both.
  load     the archive's image id and names are read from its manifest.json before anything is
           loaded: an archive of another image is refused untouched, and so is one that would give
           this tool's own image name (deepbench/<platform>:<version>) to an image this machine did
           not build (own_images.py: deepbench-run would take it for the platform's image); then
           docker load, and the id checked
  push     to a registry the user names (the docker SDK): tag, push, REF@sha256:<manifest digest>
  pull     by digest, the id checked: a different image is refused.
A submission's image comes back this way for a reader to inspect; `deepbench verify` never runs
it (it re-runs in the verifier's own image)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import UserError
from ...platforms import PLATFORMS
from . import own_images
from .platform_images import find

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

CHUNK = 1 << 21
GZIP_LEVEL = 6  # gzip's own default: about a third of the size of an image's tar
SHA_SUFFIX = ".sha256"
DEFAULT_REGISTRY = ("docker.io/library/", "docker.io/", "index.docker.io/")  # what a short name stands for

Log = Callable[[str], None]


@dataclass(frozen=True)
class Archive:
    path: Path
    sha256: str
    bytes: int
    image_id: str


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _get(client: docker.DockerClient, ref: str) -> Image:
    image = find(client, ref)
    if image is None:
        raise UserError(f"no image {ref} here (see: deepbench images list, docker images)")
    return image


def export(client: docker.DockerClient, ref: str, out: Path, log: Log = print) -> Archive:
    """Write image `ref` to `out` (gzip-compressed when it ends in .gz) and out.sha256 beside it."""
    image = _get(client, ref)
    named: bool | str = ref if ref in image.tags else bool(image.tags)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    log(f"saving {ref} ({image.id[:19]}) to {out} ...")
    try:
        with (
            gzip.GzipFile(partial, "wb", compresslevel=GZIP_LEVEL, mtime=0)
            if out.name.endswith(".gz")
            else partial.open("wb")
        ) as f:
            for chunk in image.save(chunk_size=CHUNK, named=named):
                f.write(chunk)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    hexdigest = sha256_of(out)
    out.with_name(out.name + SHA_SUFFIX).write_text(f"{hexdigest}  {out.name}\n")
    return Archive(out, hexdigest, out.stat().st_size, image.id)


def _manifest(path: Path) -> list[dict]:
    """The archive's manifest.json (docker save writes it in both of its formats), nothing loaded."""
    try:
        with tarfile.open(path, "r:*") as tar:
            member = tar.extractfile("manifest.json")
            manifest = json.load(member) if member else None
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
        raise UserError(f"{path} is not an image archive of docker save / deepbench images export ({exc})") from None
    return [m for m in manifest if isinstance(m, dict)] if isinstance(manifest, list) else []


def archive_image_id(path: Path) -> str:
    """The id of the image in a docker save archive, from its manifest.json (nothing is loaded)."""
    configs = {Path(str(m.get("Config", ""))).name.removesuffix(".json") for m in _manifest(path)}
    if len(configs) != 1:
        raise UserError(f"{path} holds {len(configs)} images; an archive of one image is expected")
    return "sha256:" + configs.pop()


def archive_tags(path: Path) -> list[str]:
    """The names `docker load` would give the archive's image (its RepoTags), short form."""
    tags = [t for m in _manifest(path) for t in (m.get("RepoTags") or []) if isinstance(t, str)]
    return [next((t[len(p) :] for p in DEFAULT_REGISTRY if t.startswith(p)), t) for t in tags]


def _refuse_own_names(path: Path, image_id: str) -> None:
    """An archive that would name its image as one of this tool's platforms' own, when this machine did
    not build that image: loading it would make the platform's name mean the submitter's code."""
    own = {p.image for p in PLATFORMS.values()}
    taken = [t for t in archive_tags(path) if t in own]
    if taken and own_images.recorded(image_id) is None:
        raise UserError(
            f"{path} would give its image {image_id[:19]}, which was not built here, this tool's own name "
            f"{taken[0]} (deepbench-run would take it for that platform's image): refused, nothing was loaded"
        )


def load(
    client: docker.DockerClient, path: Path, expect_id: str, expect_sha256: str | None = None, log: Log = print
) -> Image:
    """Load the archive at `path` if it holds image `expect_id` (and has the recorded SHA-256)."""
    if expect_sha256 is not None:
        found = sha256_of(path)
        if found != expect_sha256:
            raise UserError(
                f"{path} is not the archive recorded (its SHA-256 is {found[:16]}..., the record says "
                f"{expect_sha256[:16]}...): it changed or is another file"
            )
    held = archive_image_id(path)
    if held != expect_id:
        raise UserError(f"{path} holds image {held[:19]}, not the one expected ({expect_id[:19]}): refused")
    _refuse_own_names(path, held)
    log(f"loading {path} ...")
    with path.open("rb") as f:
        client.images.load(f)
    image = find(client, expect_id)
    if image is None:
        raise UserError(f"docker load of {path} did not give image {expect_id[:19]}")
    return image


def _stream_errors(lines: Iterable[dict]) -> tuple[str, str]:
    """(error, digest) from the daemon's push stream."""
    error = digest = ""
    for line in lines:
        error = line.get("error", error)
        digest = (line.get("aux") or {}).get("Digest", digest)
    return error, digest


def push(client: docker.DockerClient, ref: str, to: str, log: Log = print) -> str:
    """Push image `ref` as `to` (REGISTRY/REPO[:TAG]); returns REGISTRY/REPO@sha256:<digest>."""
    from docker.errors import APIError
    from docker.utils import parse_repository_tag

    image = _get(client, ref)
    repo, tag = parse_repository_tag(to)
    tag = tag or "latest"
    log(f"pushing {ref} ({image.id[:19]}) to {repo}:{tag} ...")
    try:
        image.tag(repo, tag)
        error, digest = _stream_errors(client.images.push(repo, tag=tag, stream=True, decode=True))
    except APIError as exc:
        error, digest = str(getattr(exc, "explanation", None) or exc), ""
    if error or not digest:
        raise UserError(
            f"pushing to {repo}:{tag} failed: {(error or 'no digest returned').splitlines()[0]} "
            f"(log in with docker login, or check the registry's name)"
        )
    return f"{repo}@{digest}"


def pull_by_digest(client: docker.DockerClient, ref: str, expect_id: str, log: Log = print) -> Image:
    """Pull REPO@sha256:... and check it is image `expect_id`."""
    from docker.errors import APIError, ImageNotFound

    repo, sep, digest = ref.partition("@")
    if not sep or not digest.startswith("sha256:"):
        raise UserError(f"{ref} does not name an image by digest (REPO@sha256:...)")
    log(f"pulling {ref} ...")
    try:
        image = client.images.pull(repo, tag=digest)
    except (APIError, ImageNotFound) as exc:
        reason = str(getattr(exc, "explanation", None) or exc).splitlines()[0]
        raise UserError(f"cannot pull {ref} ({reason})") from None
    if image.id != expect_id:
        raise UserError(f"{ref} is image {image.id[:19]}, not the one expected ({expect_id[:19]}): refused")
    return image
