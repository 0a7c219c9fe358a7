"""Where a platform's image is defined: images/<vendor>/ in a source checkout of deepbench.

Each vendor's folder holds its Dockerfile (`ARG BASE_IMAGE` names the vendor's base), the lock
input and lock of its Python packages (requirements.in, uv.toml, requirements.lock: see
image_lock.py) and, once a base has come from a registry, base.lock: the digest that base tag
named then, so that later builds start from the very same base even after the tag has moved."""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import UserError
from ...platforms import Platform

REPO = Path(__file__).resolve().parents[3]
IMAGES_DIR = REPO / "images"
COMMON_DIR = IMAGES_DIR / "common"
BASE_LOCK = "base.lock"
BASE_LOCK_HEADER = (
    "# Base images by digest: written when a base tag was first pulled (or by deepbench images lock),\n"
    "# read by deepbench images build, which then builds FROM tag@digest. Commit it beside the lock.\n"
)


def vendor_dir(platform: Platform) -> Path:
    return IMAGES_DIR / platform.image_dir


def dockerfile(platform: Platform) -> Path:
    path = vendor_dir(platform) / "Dockerfile"
    if not path.exists():
        raise UserError(
            f"no Dockerfile for {platform.name} at {path}: images are built from a source checkout "
            f"of deepbench (or use --image with an image you have, or --local)"
        )
    return path


def dockerfile_arg(platform: Platform, name: str) -> str:
    """The default of `ARG NAME=...` in the platform's Dockerfile (the one place it is said)."""
    match = re.search(rf"^ARG {re.escape(name)}=(.*)$", dockerfile(platform).read_text(), re.MULTILINE)
    return match.group(1).strip().strip('"') if match else ""


def _base_lock(platform: Platform) -> dict[str, str]:
    """tag -> digest, from images/<vendor>/base.lock (`tag@sha256:...` a line)."""
    path = vendor_dir(platform) / BASE_LOCK
    if not path.is_file():
        return {}
    pins = {}
    for line in path.read_text().splitlines():
        ref, sep, digest = line.strip().partition("@")
        if sep and not ref.startswith("#"):
            pins[ref] = digest
    return pins


def pinned_base(platform: Platform, ref: str) -> str:
    """`ref` as the build uses it: a tag with a recorded digest becomes tag@digest."""
    if "@" in ref:
        return ref
    digest = _base_lock(platform).get(ref)
    return f"{ref}@{digest}" if digest else ref


def record_base(platform: Platform, ref: str, digest: str) -> bool:
    """Record that tag `ref` named `digest`; False when it was already recorded so."""
    pins = _base_lock(platform)
    if pins.get(ref) == digest:
        return False
    pins[ref] = digest
    path = vendor_dir(platform) / BASE_LOCK
    path.write_text(BASE_LOCK_HEADER + "".join(f"{r}@{d}\n" for r, d in sorted(pins.items())))
    return True
