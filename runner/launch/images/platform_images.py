"""The platforms' images: build them from images/<vendor>/, pull them, find them, describe them,
and check that an image is one this host can run.

A build context is assembled here rather than sent from the repository root, and holds only
what the image is made of: the vendor's Dockerfile and requirements.lock, install-harness.sh,
the package's source (src/: pyproject, setup.py, README, kernels/, runner/ without its published results)
and the wheelhouse files the lock names (wheelhouse/, empty when building online). Every
Dockerfile has a build stage, where wheels, source and pip stay, and a final stage holding the
base, a non-root user and the installed environment, copied as two layers (dependencies, then
the harness), so a change to the source leaves the dependency layer as it was. Results record
the image's digest, not its tag."""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepbench.kernels import __version__
from deepbench.kernels.provenance import harness_sha256, source_state

from ...errors import UserError
from ...platforms import PLATFORMS, Platform
from . import image_lock, own_images
from .image_sources import COMMON_DIR, REPO, dockerfile, dockerfile_arg, pinned_base, record_base

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

# What of the repository the image installs from (the package's source, nothing else).
SOURCE_ITEMS = ("pyproject.toml", "setup.py", "README.md", "runner", "kernels")
SKIP_SOURCE = ("runner/published",)  # our published runs: data for the host's reports, not the harness
SKIP_PARTS = {"__pycache__", ".pytest_cache"}
VENDOR_ITEMS = ("Dockerfile", image_lock.LOCK_FILE)
LABEL_PREFIX = "org.deepbench."
LABEL_PLATFORM = LABEL_PREFIX + "platform"
LABEL_BASE = LABEL_PREFIX + "base-image"
LABEL_BASE_ID = LABEL_PREFIX + "base-id"  # the base's image id: a local base has no registry digest
LABEL_VERSION = LABEL_PREFIX + "version"
LABEL_INSTALL = LABEL_PREFIX + "install"
LABEL_LOCK = LABEL_PREFIX + "lock-sha256"  # the requirements.lock the packages came from
LABEL_HARNESS = LABEL_PREFIX + "harness-sha256"  # the harness source the image holds
OCI_PREFIX = "org.opencontainers.image."
OCI_VERSION = OCI_PREFIX + "version"
# Where a registry cannot be reached, the daemon says one of these.
PULL_FAILURES = (
    "pull access denied",
    "no such host",
    "dial tcp",
    "TLS handshake",
    "i/o timeout",
    "manifest unknown",
    "manifest for",
    "connection refused",
    "Temporary failure",
)
NO_REGISTRY_HINT = (
    "build it on a local base instead: deepbench images build --platform {p} --base-image LOCAL "
    "--wheelhouse DIR (docs/containers.md), or run without a container: deepbench-run --local"
)

Log = Callable[[str], None]


def _add_tree(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = set(Path(info.name).parts)
        if parts & SKIP_PARTS or info.name.endswith(".pyc") or ".egg-info" in info.name:
            return None
        if any(info.name == f"src/{s}" or info.name.startswith(f"src/{s}/") for s in SKIP_SOURCE):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    tar.add(str(path), arcname=arcname, filter=keep)


def build_context(platform: Platform, wheels: list[Path], out: io.BufferedRandom) -> None:
    """Write the build context (an uncompressed tar) to `out`."""
    vendor = dockerfile(platform).parent
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in VENDOR_ITEMS:
            _add_tree(tar, vendor / name, name)
        for item in sorted(COMMON_DIR.iterdir()):
            _add_tree(tar, item, item.name)
        for name in SOURCE_ITEMS:
            _add_tree(tar, REPO / name, f"src/{name}")
        folder = tarfile.TarInfo("wheelhouse")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        for wheel in wheels:
            tar.add(str(wheel), arcname=f"wheelhouse/{wheel.name}")
    out.seek(0)


def _revision() -> str:
    state = source_state(REPO)
    return (state.commit or "unknown") + ("+modified" if state.state == "modified" else "")


def build(
    client: docker.DockerClient,
    platform: Platform,
    tag: str,
    base_image: str | None = None,
    wheelhouse: Path | None = None,
    log: Log = print,
    no_cache: bool = False,
) -> Image:
    """Build the platform's image under `tag` from its lock, streaming the builder's output to `log`."""
    from docker.errors import APIError, BuildError

    from .devices import check_can_run

    check_can_run(platform, log)  # an arm64 build on x86 runs arm64 binaries: binfmt first
    wheels = image_lock.select_wheels(platform, wheelhouse) if wheelhouse is not None else []
    image_lock.read_lock(image_lock.lock_path(platform))
    asked = base_image or dockerfile_arg(platform, "BASE_IMAGE")
    base = pinned_base(platform, asked)
    present = find(client, base)
    labels = {
        LABEL_PLATFORM: platform.name,
        LABEL_BASE: base,
        LABEL_VERSION: __version__,
        LABEL_INSTALL: "wheelhouse (offline)" if wheelhouse else "online",
        LABEL_HARNESS: harness_sha256(),
        LABEL_LOCK: image_lock.lock_sha256(platform),
    }
    if present is not None:
        labels[LABEL_BASE_ID] = present.id
    buildargs = {"BASE_IMAGE": base, "VERSION": __version__, "REVISION": _revision()}
    with tempfile.TemporaryFile() as context:
        build_context(platform, wheels, context)
        log(
            f"building {tag} for {platform.name} ({platform.platform_arch}) on {base}"
            + (f", offline from {len(wheels)} locked wheels" if wheelhouse else ", online")
        )
        image_id = ""
        error = ""
        try:
            for chunk in client.api.build(
                fileobj=context,
                custom_context=True,
                tag=tag,
                buildargs=buildargs,
                labels=labels,
                platform=platform.platform_arch,
                rm=True,
                forcerm=True,
                nocache=no_cache,
                decode=True,
            ):
                if "stream" in chunk:
                    line = chunk["stream"].rstrip()
                    if line:
                        log(line)
                if "error" in chunk:
                    error = chunk["error"].strip()
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
        except (APIError, BuildError) as exc:
            error = str(exc)
    if error or not image_id:
        raise _build_failure(platform, tag, base, error or "the builder returned no image")
    _record_base_digest(client, platform, asked, log)
    image = client.images.get(image_id)
    own_images.record_build(image.id, platform, tag, log)  # what verify may run: this machine's own build
    return image


def _record_base_digest(client: docker.DockerClient, platform: Platform, ref: str, log: Log) -> None:
    """A base named by tag that came from a registry: keep the digest it had (base.lock), so the
    next build starts from the same base even after the tag moved. A local base has none."""
    from docker.utils import parse_repository_tag

    image = find(client, ref) if "@" not in ref else None
    repo, _ = parse_repository_tag(ref)
    digests = (
        [d.split("@", 1)[1] for d in (image.attrs.get("RepoDigests") or []) if d.split("@", 1)[0] == repo]
        if image is not None
        else []
    )
    if digests and record_base(platform, ref, digests[0]):
        log(
            f"recorded {ref}@{digests[0]} in images/{platform.image_dir}/base.lock: later builds use that digest "
            f"(commit the file beside the lock)"
        )


def pin_base(client: docker.DockerClient, platform: Platform, log: Log = print) -> None:
    """Ask the base's registry which digest the Dockerfile's base tag names now (nothing is pulled),
    and record it in base.lock; where the registry cannot be reached, the tag stays as it is."""
    from docker.errors import APIError

    ref = dockerfile_arg(platform, "BASE_IMAGE")
    if "@" in ref:
        return
    try:
        digest = client.images.get_registry_data(ref).id
    except APIError as exc:
        reason = str(getattr(exc, "explanation", None) or exc).splitlines()[0]
        log(f"{ref}: its registry did not answer ({reason}); the base stays pinned by tag until its first pull")
        return
    if record_base(platform, ref, digest):
        log(f"recorded {ref}@{digest} in images/{platform.image_dir}/base.lock")


def _build_failure(platform: Platform, tag: str, base: str, error: str) -> UserError:
    first = error.strip().splitlines()[0] if error.strip() else error
    if any(s.lower() in error.lower() for s in PULL_FAILURES):
        return UserError(
            f"cannot build {tag}: its base image {base} is not here and cannot be pulled ({first}); "
            + NO_REGISTRY_HINT.format(p=platform.name)
        )
    return UserError(
        f"building {tag} failed: {first} (the build output above says where); fix it, pass another "
        f"--base-image, or run without a container: deepbench-run --local"
    )


def pull(client: docker.DockerClient, ref: str, platform: Platform) -> Image:
    from docker.errors import APIError, ImageNotFound
    from docker.utils import parse_repository_tag

    repo, tag = parse_repository_tag(ref)
    try:
        return client.images.pull(repo, tag=tag or "latest", platform=platform.platform_arch)
    except (APIError, ImageNotFound) as exc:
        reason = getattr(exc, "explanation", None) or str(exc)
        raise UserError(
            f"image {ref} is not here and cannot be pulled ({str(reason).splitlines()[0]}); "
            + NO_REGISTRY_HINT.format(p=platform.name)
        ) from None


def find(client: docker.DockerClient, ref: str) -> Image | None:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(ref)
    except ImageNotFound:
        return None


def ensure(
    client: docker.DockerClient,
    platform: Platform,
    ref: str,
    *,
    want_pull: bool = False,
    want_build: bool = False,
    base_image: str | None = None,
    wheelhouse: Path | None = None,
    log: Log = print,
) -> Image:
    """The image to run: built (--build) or pulled (--pull) when asked, else the one present;
    a missing image is built when it is the platform's own tag, pulled when the user named it."""
    if want_build:
        return build(client, platform, ref, base_image, wheelhouse, log)
    if want_pull:
        log(f"pulling {ref} ...")
        return pull(client, ref, platform)
    image = find(client, ref)
    if image is not None:
        return image
    if ref == platform.image:
        log(f"{ref} is not here: building it (once; later runs reuse it)")
        return build(client, platform, ref, base_image, wheelhouse, log)
    log(f"{ref} is not here: pulling it ...")
    return pull(client, ref, platform)


def provenance(image: Image, ref: str) -> dict[str, Any]:
    """What identifies the image that ran: its content digest, not only the tag it was called by.
    `digest` is the registry's manifest digest when the image came from one, else the image id
    (the SHA-256 of its configuration, which names its content as surely)."""
    attrs = image.attrs
    repo_digests = list(attrs.get("RepoDigests") or [])
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return {
        "tag": ref,
        "id": image.id,
        "digest": repo_digests[0].split("@", 1)[1] if repo_digests else image.id,
        "repo_digests": repo_digests,
        "tags": list(image.tags),
        "os": attrs.get("Os", ""),
        "architecture": attrs.get("Architecture", ""),
        "created": attrs.get("Created", ""),
        "labels": {k: v for k, v in labels.items() if k.startswith((LABEL_PREFIX, OCI_PREFIX))},
    }


def local_images(client: docker.DockerClient) -> Iterable[Image]:
    """Every image built by `deepbench images build` (they carry the platform label)."""
    return client.images.list(filters={"label": LABEL_PLATFORM})


def check_image(
    image: Image,
    ref: str,
    platform: Platform,
    *,
    own: bool,
    force: bool = False,
    log: Log = print,
    hint: str = "or pass --force-image to run it anyway",
) -> None:
    """An image this host may run the plan in, for deepbench-run: a deepbench image (its labels), for
    this platform, from this deepbench version. --force-image runs any image anyway. The harness source
    itself must match for the platform's own tag (rebuild it); an image the user named that holds
    other source of the same version is run with a warning. Labels say what an image claims, so this
    catches mistakes; they prove nothing, and verify never relies on them (own_images.py)."""
    labels = image.labels or {}
    theirs = labels.get(LABEL_PLATFORM)
    rebuild = (
        f"rebuild it (deepbench images build --platform {platform.name}, with --base-image/--wheelhouse "
        f"as before) or run with --local"
    )
    problem = ""
    if theirs is None:
        problem = (
            f"{ref} is not a deepbench image (no {LABEL_PLATFORM} label): build one with deepbench images "
            f"build --platform {platform.name}"
        )
    elif theirs not in PLATFORMS or PLATFORMS[theirs].image_dir != platform.image_dir:
        problem = f"{ref} is a deepbench image for {theirs}, not {platform.name}"
    else:
        version = labels.get(LABEL_VERSION) or labels.get(OCI_VERSION)
        if version != __version__:
            problem = (
                f"{ref} holds deepbench {version or '(unlabelled version)'}, this host {__version__}: the plan "
                f"this host writes may not be read by that harness; {rebuild}"
            )
    if problem:
        if not force:
            raise UserError(f"{problem} ({hint})")
        log(f"warning: {problem}; run anyway (--force-image)")
        return
    ours = harness_sha256()
    sha = labels.get(LABEL_HARNESS)
    if sha == ours:
        return
    what = f"image {ref} holds another deepbench harness ({(sha or 'unlabelled')[:12]}) than this host's ({ours[:12]})"
    if own and not force:
        raise UserError(f"{what}: {rebuild}")
    log(f"warning: {what}; its results come from that harness")
