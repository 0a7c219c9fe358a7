"""Build, list and prepare the platforms' images.

  deepbench images build --platform intel                       # on the vendor's pinned base, online
  deepbench images build --platform intel --base-image deepbench-local/debian:bookworm --wheelhouse wh
  deepbench images wheelhouse --platform intel --out wh         # download the wheels on this host
  deepbench images list

With --wheelhouse the image installs from those wheels only (pip --no-index): no network is
needed during the build. `wheelhouse` downloads deepbench's dependencies and the platform's
extras for the image's CPython and architecture; anything after `--` goes to pip download as
well (a requirement, a local wheel, --extra-index-url ...)."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from rich.table import Table

from .. import images
from ..display import make_console
from ..docker_client import connect
from ..errors import UserError
from ..platforms import PLATFORMS, get_platform

NAME = "images"
HELP = "build, list and prepare the platforms' container images"
DEFAULT_PYTHON = "3.11"  # CPython of the default Intel base and of Debian bookworm


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="images_command", metavar="ACTION", parser_class=type(parser))
    b = sub.add_parser("build", help="build a platform's image")
    b.add_argument("--platform", required=True, metavar="P", help=", ".join(PLATFORMS))
    b.add_argument("--base-image", metavar="IMAGE", help="base to build on (default: the Dockerfile's pinned "
                   "vendor image)")
    b.add_argument("--wheelhouse", type=Path, metavar="DIR", help="install from the wheels in DIR only, offline")
    b.add_argument("--tag", metavar="REF", help="tag of the image (default: deepbench/<platform>:<version>)")
    b.add_argument("--quiet", action="store_true", help="do not show the builder's output")
    w = sub.add_parser("wheelhouse", help="download the wheels an offline build needs")
    w.add_argument("--platform", required=True, metavar="P", help=", ".join(PLATFORMS))
    w.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the wheels")
    w.add_argument("--python", default=DEFAULT_PYTHON, metavar="X.Y",
                   help=f"CPython version of the image (default {DEFAULT_PYTHON})")
    w.add_argument("pip_args", nargs=argparse.REMAINDER, help="after --: more for pip download")
    sub.add_parser("list", help="show the platforms' images and those built here")


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "images_command", None)
    if action == "build":
        return _build(args)
    if action == "wheelhouse":
        return _wheelhouse(args)
    if action == "list":
        return _list()
    raise UserError("say what to do: deepbench images build | wheelhouse | list (see deepbench images --help)")


def _build(args: argparse.Namespace) -> int:
    console = make_console()
    platform = get_platform(args.platform)
    tag = args.tag or platform.image
    log = (lambda line: None) if args.quiet else (lambda line: console.print(line, highlight=False, markup=False))
    client = connect()
    image = images.build(client, platform, tag, args.base_image, args.wheelhouse, log)
    info = images.provenance(image, tag)
    console.print(f"built {tag}: {info['id']} ({info['architecture']}, on {info['labels'].get(images.LABEL_BASE)})",
                  highlight=False)
    return 0


def _wheelhouse(args: argparse.Namespace) -> int:
    console = make_console()
    platform = get_platform(args.platform)
    extra = [a for a in args.pip_args if a != "--"]
    count = images.make_wheelhouse(platform, args.out, args.python, extra,
                                   log=lambda line: console.print(line, highlight=False, markup=False))
    console.print(f"{count} wheels in {args.out}: build with deepbench images build --platform {platform.name} "
                  f"--wheelhouse {args.out} --base-image IMAGE", highlight=False)
    return 0


def _list() -> int:
    console = make_console()
    client = connect()
    table = Table(title="deepbench images", title_justify="left")
    for col in ("platform", "tag", "id", "arch", "created", "size", "base"):
        table.add_column(col)
    shown = set()
    for p in PLATFORMS.values():
        image = images.find(client, p.image)
        if image is None:
            table.add_row(p.name, p.image, "(not built)", p.platform_arch.split("/")[-1], "", "", "")
            continue
        shown.add(image.id)
        table.add_row(*_row(p.name, p.image, image))
    for image in images.local_images(client):
        if image.id in shown:
            continue
        labels = image.labels or {}
        table.add_row(*_row(labels.get(images.LABEL_PLATFORM, "?"), ", ".join(image.tags) or "(untagged)", image))
    console.print(table)
    return 0


def _row(platform: str, tag: str, image) -> tuple[str, ...]:
    attrs = image.attrs
    created = attrs.get("Created", "")[:19].replace("T", " ")
    try:
        created = datetime.fromisoformat(created).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        pass
    size = f"{attrs.get('Size', 0) / 1e9:.2f} GB"
    base = (image.labels or {}).get(images.LABEL_BASE, "")
    return platform, tag, image.id.removeprefix("sha256:")[:12], attrs.get("Architecture", ""), created, size, base
