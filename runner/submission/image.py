"""The run's image in a submission: recorded by id with where to get it (`deepbench submit
--image-archive FILE`, `--push REF`), so that a reader can inspect it. `deepbench verify` never
loads, pulls or runs it (a submission is data, and its image is the submitter's code): it re-runs
in the verifier's own image and reports a different id (verify.py)."""

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


def image_source(
    run_image: Any, archive: Path | None = None, push_to: str | None = None, log: Log = print
) -> ImageSource | None:
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
        from ..launch.images import image_archive
        from ..launch.images.docker_client import connect

        client = connect()
        if archive is not None:
            if archive.exists():  # made before, by deepbench images export: it must hold the run's image
                held = image_archive.archive_image_id(archive)
                if held != image_id:
                    raise UserError(f"{archive} holds image {held[:19]}, not the run's ({image_id[:19]})")
                written = image_archive.Archive(archive, image_archive.sha256_of(archive), archive.stat().st_size, held)
            else:
                written = image_archive.export(client, image_id, archive, log)
            recorded = ImageArchive(name=archive.name, sha256=written.sha256, bytes=written.bytes)
        if push_to:
            registry = image_archive.push(client, image_id, push_to, log)
    return ImageSource(id=image_id, archive=recorded, registry=registry)
