"""The run's image in a submission: recorded by id with where to get it (`deepbench submit
--image-archive FILE`, `--push REF`), and got back by `deepbench verify` on another machine:
the image here with that id, else the archive (beside the bundle, or --image-archive), else a
pull by digest from the registry recorded. Whatever comes back must have the recorded id."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from .layout import ImageArchive, ImageSource

Log = Callable[[str], None]


def run_image_id(run_image: Any) -> str | None:
    """The image id a run recorded (provenance.image), or None for a --local run."""
    return run_image.get("id") if isinstance(run_image, dict) else None


def image_source(run_image: Any, archive: Path | None = None, push_to: str | None = None,
                 log: Log = print) -> ImageSource | None:
    """What the bundle records of the run's image; exports and pushes it when asked."""
    image_id = run_image_id(run_image)
    if image_id is None:
        if archive or push_to:
            raise UserError("this run was made with --local: it has no image to export or push")
        return None
    recorded = None
    # An image that came from a registry can be pulled from there again by the digest it has.
    registry = next((r for r in run_image.get("repo_digests") or [] if "@sha256:" in r), None)
    if archive or push_to:
        from ..launch import image_archive
        from ..launch.docker_client import connect

        client = connect()
        if archive is not None:
            if archive.exists():  # made before, by deepbench images export: it must hold the run's image
                held = image_archive.archive_image_id(archive)
                if held != image_id:
                    raise UserError(f"{archive} holds image {held[:19]}, not the run's ({image_id[:19]})")
                written = image_archive.Archive(archive, image_archive.sha256_of(archive), archive.stat().st_size,
                                                held)
            else:
                written = image_archive.export(client, image_id, archive, log)
            recorded = ImageArchive(name=archive.name, sha256=written.sha256, bytes=written.bytes)
        if push_to:
            registry = image_archive.push(client, image_id, push_to, log)
    return ImageSource(id=image_id, archive=recorded, registry=registry)


def _archive_path(bundle: Path, source: ImageSource | None, given: Path | None) -> Path | None:
    if given is not None:
        if not given.is_file():
            raise UserError(f"--image-archive {given} is not a file")
        return given
    if source is None or source.archive is None:
        return None
    for folder in (bundle.resolve().parent, bundle):
        if (folder / source.archive.name).is_file():
            return folder / source.archive.name
    return None


def obtain(bundle: Path, source: ImageSource | None, run_image: Any, given_archive: Path | None,
           log: Log = print) -> str:
    """Make the submission's image present here; returns its id. Refuses any other image."""
    from ..launch import image_archive
    from ..launch.docker_client import connect
    from ..launch.images import find

    image_id = run_image_id(run_image)
    if image_id is None:
        raise UserError("the submission records no image: verify it with --local")
    client = connect()
    if find(client, image_id) is not None:
        return image_id
    archive = _archive_path(bundle, source, given_archive)
    if archive is not None:
        recorded = source.archive.sha256 if source and source.archive and archive.name == source.archive.name \
            else None
        image_archive.load(client, archive, image_id, recorded, log)
        return image_id
    refs = [source.registry] if source and source.registry else []
    refs += [r for r in run_image.get("repo_digests") or [] if isinstance(r, str) and r not in refs]
    failures = []
    for ref in refs:
        try:
            image_archive.pull_by_digest(client, ref, image_id, log)
            return image_id
        except UserError as exc:
            failures.append(str(exc))
    where = f" ({'; '.join(failures)})" if failures else ""
    wanted = f" ({source.archive.name}, beside the bundle)" if source and source.archive else ""
    raise UserError(f"the submission's image {image_id[:19]} is not here and cannot be had{where}: give its "
                    f"archive{wanted} with --image-archive FILE, or docker load it, or verify with --local")
