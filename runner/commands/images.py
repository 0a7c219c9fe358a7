"""Build, lock, list, export and push the platforms' images.

  deepbench images build --platform intel                       # on the vendor's pinned base, online
  deepbench images build --platform intel --base-image deepbench-local/debian:bookworm --wheelhouse wh
  deepbench images wheelhouse --platform intel --out wh         # the lock's wheels, downloaded on this host
  deepbench images lock --platform arm                          # re-lock after editing requirements.in
  deepbench images export deepbench/intel:0.1.0 --out intel.tar # the exact image as a file (docker load)
  deepbench images push deepbench/intel:0.1.0 --to registry.example.com/me/deepbench-intel:0.1.0
  deepbench images list

Each image installs its requirements.lock (images/<vendor>/) with hashes checked; `lock` remakes
it from requirements.in with uv. With --wheelhouse the image installs from those wheels only (pip
--no-index): no network is needed during the build. `wheelhouse` downloads the lock's files for
the image's CPython and architecture; anything after `--` goes to pip download as well."""

from __future__ import annotations

import argparse
import contextlib
from datetime import datetime
from pathlib import Path

from ..errors import UserError
from ..launch.images import image_archive, image_lock, platform_images
from ..launch.images.docker_client import connect
from ..platforms import PLATFORMS, get_platform, platform_names
from ..render.display import make_console, print_tables
from ..render.tables import Table

NAME = "images"
HELP = "build, lock, list, export and push the platforms' container images"
ALL = "all"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="images_command", metavar="ACTION", parser_class=type(parser))
    b = sub.add_parser("build", help="build a platform's image")
    b.add_argument("--platform", required=True, metavar="P", help=platform_names())
    b.add_argument(
        "--base-image", metavar="IMAGE", help="base to build on (default: the Dockerfile's pinned vendor image)"
    )
    b.add_argument("--wheelhouse", type=Path, metavar="DIR", help="install from the wheels in DIR only, offline")
    b.add_argument("--tag", metavar="REF", help="tag of the image (default: deepbench/<platform>:<version>)")
    b.add_argument("--no-cache", action="store_true", help="build every step again, reusing no cached layer")
    b.add_argument("--quiet", action="store_true", help="do not show the builder's output")
    w = sub.add_parser("wheelhouse", help="download the locked wheels an offline build needs")
    w.add_argument("--platform", required=True, metavar="P", help=platform_names())
    w.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the wheels")
    w.add_argument("--python", metavar="X.Y", help="CPython version of the image (default: the lock's, uv.toml)")
    w.add_argument(
        "--wheels",
        type=Path,
        metavar="DIR",
        help="take what the Dockerfile's extra index holds (the intel image's CPU wheels) from the wheels in "
        "DIR instead",
    )
    w.add_argument("pip_args", nargs=argparse.REMAINDER, help="after --: more for pip download")
    lk = sub.add_parser(
        "lock",
        help="re-lock a platform image's packages (uv pip compile --generate-hashes) and "
        "pin its base by digest when its registry answers",
    )
    lk.add_argument("--platform", required=True, metavar="P", help=f"{platform_names()} or {ALL}")
    lk.add_argument(
        "--upgrade",
        action="store_true",
        help="take the newest versions requirements.in allows (default: keep the locked ones that still fit)",
    )
    lk.add_argument(
        "--wheels",
        type=Path,
        metavar="DIR",
        help="resolve what the Dockerfile's extra index holds "
        "from the wheels in DIR instead (offline, or where that index cannot be reached)",
    )
    lk.add_argument(
        "--check", action="store_true", help="change nothing: exit 1 if a lock does not meet its requirements.in"
    )
    lk.add_argument("uv_args", nargs=argparse.REMAINDER, help="after --: more for uv pip compile")
    e = sub.add_parser("export", help="write an image to a file (docker save), with its SHA-256 beside it")
    e.add_argument("image", metavar="IMAGE", help="tag or id of the image")
    e.add_argument("--out", type=Path, required=True, metavar="FILE", help="the archive (.tar, or .tar.gz)")
    p = sub.add_parser("push", help="push an image to a registry and print its digest")
    p.add_argument("image", metavar="IMAGE", help="tag or id of the image")
    p.add_argument("--to", required=True, metavar="REF", help="REGISTRY/REPO[:TAG] (log in first: docker login)")
    sub.add_parser("list", help="show the platforms' images and those built here")


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "images_command", None)
    actions = {
        "build": _build,
        "wheelhouse": _wheelhouse,
        "lock": _lock,
        "export": _export,
        "push": _push,
        "list": lambda _: _list(),
    }
    if action not in actions:
        raise UserError(
            "say what to do: deepbench images build | wheelhouse | lock | export | push | list "
            "(see deepbench images --help)"
        )
    return actions[action](args)


def _printer():
    console = make_console()
    return lambda line: console.print(line, highlight=False, markup=False)


def _build(args: argparse.Namespace) -> int:
    say = _printer()
    platform = get_platform(args.platform)
    tag = args.tag or platform.image
    client = connect()
    image = platform_images.build(
        client,
        platform,
        tag,
        args.base_image,
        args.wheelhouse,
        (lambda line: None) if args.quiet else say,
        no_cache=args.no_cache,
    )
    info = platform_images.provenance(image, tag)
    say(f"built {tag}: {info['id']} ({info['architecture']}, on {info['labels'].get(platform_images.LABEL_BASE)})")
    return 0


def _wheelhouse(args: argparse.Namespace) -> int:
    say = _printer()
    platform = get_platform(args.platform)
    extra = [a for a in args.pip_args if a != "--"]
    count = image_lock.make_wheelhouse(platform, args.out, args.python, args.wheels, extra, log=say)
    say(
        f"{count} wheels in {args.out}: build with deepbench images build --platform {platform.name} "
        f"--wheelhouse {args.out} --base-image IMAGE"
    )
    return 0


def _lock(args: argparse.Namespace) -> int:
    say = _printer()
    chosen = list(PLATFORMS.values()) if args.platform == ALL else [get_platform(args.platform)]
    folders = {p.image_dir: p for p in chosen}  # cpu and intel share one image
    if args.check:
        problems = [f"{p.image_dir}: {problem}" for p in folders.values() for problem in image_lock.stale(p)]
        for line in problems:
            say(line)
        say(f"{len(problems)} problems in {len(folders)} locks" if problems else f"{len(folders)} locks are current")
        return 1 if problems else 0
    extra = [a for a in args.uv_args if a != "--"]
    for platform in folders.values():
        path = image_lock.lock(platform, wheels=args.wheels, upgrade=args.upgrade, extra=extra, log=say)
        say(f"locked {len(image_lock.read_lock(path))} packages for {platform.image_dir} in {path}")
    try:
        client = connect()
    except UserError as exc:
        say(f"bases not pinned by digest ({exc})")
        return 0
    for platform in folders.values():
        platform_images.pin_base(client, platform, log=say)
    return 0


def _export(args: argparse.Namespace) -> int:
    say = _printer()
    archive = image_archive.export(connect(), args.image, args.out, log=say)
    say(
        f"wrote {archive.path} ({archive.bytes / 1e6:.0f} MB, sha256 {archive.sha256}) holding image "
        f"{archive.image_id}; elsewhere: docker load -i {archive.path.name} (deepbench verify never runs it: "
        "it re-runs in the verifier's own image)"
    )
    return 0


def _push(args: argparse.Namespace) -> int:
    say = _printer()
    ref = image_archive.push(connect(), args.image, args.to, log=say)
    say(f"pushed: {ref}")
    return 0


def _list() -> int:
    console = make_console()
    client = connect()
    rows: list[list[str]] = []
    shown = set()
    for p in PLATFORMS.values():
        image = platform_images.find(client, p.image)
        if image is None:
            rows.append([p.name, p.image, "(not built)", p.platform_arch.split("/")[-1], "", "", ""])
            continue
        shown.add(image.id)
        rows.append(list(_row(p.name, p.image, image)))
    for image in platform_images.local_images(client):
        if image.id in shown:
            continue
        labels = image.labels or {}
        rows.append(
            list(_row(labels.get(platform_images.LABEL_PLATFORM, "?"), ", ".join(image.tags) or "(untagged)", image))
        )
    print_tables(
        console,
        [
            Table(
                "images",
                "deepbench images",
                ["platform", "tag", "id", "arch", "created", "size", "base"],
                rows,
                ("base", "created"),
                ("tag",),
            )
        ],
        how_to_see="docker image inspect",
    )
    return 0


def _row(platform: str, tag: str, image) -> tuple[str, ...]:
    attrs = image.attrs
    created = attrs.get("Created", "")[:19].replace("T", " ")
    with contextlib.suppress(ValueError):
        created = datetime.fromisoformat(created).strftime("%Y-%m-%d %H:%M")
    size = f"{attrs.get('Size', 0) / 1e9:.2f} GB"
    base = (image.labels or {}).get(platform_images.LABEL_BASE, "")
    return platform, tag, image.id.removeprefix("sha256:")[:12], attrs.get("Architecture", ""), created, size, base
