"""The platforms' images: build them from images/<vendor>/, pull them, find them, describe them.

A build context is assembled here rather than sent from the repository root: the vendor's folder
(its Dockerfile and whatever it copies), images/common/install-harness.sh, the package's source
(src/) and a wheelhouse (wheelhouse/, empty when building online). With a wheelhouse the image
installs with `pip --no-index` and needs no network: the way to build on an air-gapped site, and
here, where containers reach no registry. Results record the image's digest, not its tag."""

from __future__ import annotations

import importlib.metadata
import io
import platform as host_machine
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..kernels import __version__
from ..kernels.provenance import harness_sha256
from .errors import UserError
from .platforms import Platform

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

REPO = Path(__file__).resolve().parents[1]
IMAGES_DIR = REPO / "images"
COMMON_DIR = IMAGES_DIR / "common"
# What of the repository the image installs from (the package's source, nothing else).
SOURCE_ITEMS = ("pyproject.toml", "README.md", "runner", "kernels")
# deepbench's dependencies that only the host side imports (the terminal, Docker, workbooks and
# charts): an image holds the harness alone, so they are left out of it (the harness is installed
# with --no-deps from requirements/*.txt; tests/test_containers.py checks none of them is there).
HOST_ONLY = frozenset(("rich", "docker", "openpyxl", "matplotlib"))
SKIP_PARTS = {"__pycache__", ".pytest_cache"}
WHEEL_SUFFIXES = (".whl", ".tar.gz", ".zip")
LABEL_PREFIX = "org.deepbench."
LABEL_PLATFORM = LABEL_PREFIX + "platform"
LABEL_BASE = LABEL_PREFIX + "base-image"
LABEL_VERSION = LABEL_PREFIX + "version"
LABEL_INSTALL = LABEL_PREFIX + "install"
LABEL_HARNESS = LABEL_PREFIX + "harness-sha256"  # the harness source the image holds
# Where a registry cannot be reached, the daemon says one of these.
PULL_FAILURES = ("pull access denied", "no such host", "dial tcp", "TLS handshake", "i/o timeout",
                 "manifest unknown", "manifest for", "connection refused", "Temporary failure")
NO_REGISTRY_HINT = ("build it on a local base instead: deepbench images build --platform {p} --base-image LOCAL "
                    "--wheelhouse DIR (README: Containers), or run without a container: --local")

Log = Callable[[str], None]


def dockerfile(platform: Platform) -> Path:
    path = IMAGES_DIR / platform.image_dir / "Dockerfile"
    if not path.exists():
        raise UserError(f"no Dockerfile for {platform.name} at {path}: images are built from a source checkout "
                        f"of deepbench (or use --image with an image you have, or --local)")
    return path


def dockerfile_arg(platform: Platform, name: str) -> str:
    """The default of `ARG NAME=...` in the platform's Dockerfile (the one place it is said)."""
    match = re.search(rf"^ARG {re.escape(name)}=(.*)$", dockerfile(platform).read_text(), re.MULTILINE)
    return match.group(1).strip().strip('"') if match else ""


def _add_tree(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = set(Path(info.name).parts)
        if parts & SKIP_PARTS or info.name.endswith((".pyc", ".egg-info")) or ".egg-info" in info.name:
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    tar.add(str(path), arcname=arcname, filter=keep)


def build_context(platform: Platform, wheelhouse: Path | None, out: io.BufferedRandom) -> int:
    """Write the build context (an uncompressed tar) to `out`; returns the wheels it holds."""
    wheels = []
    if wheelhouse is not None:
        if not wheelhouse.is_dir():
            raise UserError(f"--wheelhouse {wheelhouse} is not a folder (make one with: deepbench images "
                            f"wheelhouse --platform {platform.name} --out {wheelhouse})")
        wheels = sorted(p for p in wheelhouse.iterdir() if p.name.endswith(WHEEL_SUFFIXES))
        if not wheels:
            raise UserError(f"--wheelhouse {wheelhouse} holds no wheels (make them with: deepbench images "
                            f"wheelhouse --platform {platform.name} --out {wheelhouse})")
    with tarfile.open(fileobj=out, mode="w") as tar:
        vendor = dockerfile(platform).parent
        for item in sorted(vendor.iterdir()):
            _add_tree(tar, item, item.name)
        for item in sorted(COMMON_DIR.iterdir()):
            _add_tree(tar, item, item.name)
        for name in SOURCE_ITEMS:
            _add_tree(tar, REPO / name, f"src/{name}")
        for name, text in requirement_files().items():
            data = text.encode()
            entry = tarfile.TarInfo(f"src/requirements/{name}.txt")
            entry.size, entry.mode = len(data), 0o644
            tar.addfile(entry, io.BytesIO(data))
        folder = tarfile.TarInfo("wheelhouse")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        for wheel in wheels:
            tar.add(str(wheel), arcname=f"wheelhouse/{wheel.name}")
    out.seek(0)
    return len(wheels)


def build(client: "docker.DockerClient", platform: Platform, tag: str, base_image: str | None = None,
          wheelhouse: Path | None = None, log: Log = print) -> "Image":
    """Build the platform's image under `tag`, streaming the builder's output to `log`."""
    from docker.errors import APIError, BuildError

    base = base_image or dockerfile_arg(platform, "BASE_IMAGE")
    labels = {LABEL_PLATFORM: platform.name, LABEL_BASE: base, LABEL_VERSION: __version__,
              LABEL_INSTALL: "wheelhouse (offline)" if wheelhouse else "online", LABEL_HARNESS: harness_sha256()}
    buildargs = {"BASE_IMAGE": base}
    with tempfile.TemporaryFile() as context:
        count = build_context(platform, wheelhouse, context)  # type: ignore[arg-type]
        log(f"building {tag} for {platform.name} ({platform.platform_arch}) on {base}"
            + (f", offline from {count} wheels" if wheelhouse else ", online"))
        image_id = ""
        error = ""
        try:
            for chunk in client.api.build(fileobj=context, custom_context=True, tag=tag, buildargs=buildargs,
                                          labels=labels, platform=platform.platform_arch, rm=True,
                                          forcerm=True, decode=True):
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
    return client.images.get(image_id)


def _build_failure(platform: Platform, tag: str, base: str, error: str) -> UserError:
    first = error.strip().splitlines()[0] if error.strip() else error
    if any(s.lower() in error.lower() for s in PULL_FAILURES):
        return UserError(f"cannot build {tag}: its base image {base} is not here and cannot be pulled ({first}); "
                         + NO_REGISTRY_HINT.format(p=platform.name))
    return UserError(f"building {tag} failed: {first} (the build output above says where); fix it, pass another "
                     f"--base-image, or run without a container: --local")


def pull(client: "docker.DockerClient", ref: str, platform: Platform) -> "Image":
    from docker.errors import APIError, ImageNotFound
    from docker.utils import parse_repository_tag

    repo, tag = parse_repository_tag(ref)
    try:
        return client.images.pull(repo, tag=tag or "latest", platform=platform.platform_arch)
    except (APIError, ImageNotFound) as exc:
        reason = getattr(exc, "explanation", None) or str(exc)
        raise UserError(f"image {ref} is not here and cannot be pulled ({str(reason).splitlines()[0]}); "
                        + NO_REGISTRY_HINT.format(p=platform.name)) from None


def find(client: "docker.DockerClient", ref: str) -> "Image | None":
    from docker.errors import ImageNotFound

    try:
        return client.images.get(ref)
    except ImageNotFound:
        return None


def ensure(client: "docker.DockerClient", platform: Platform, ref: str, *, want_pull: bool = False,
           want_build: bool = False, base_image: str | None = None, wheelhouse: Path | None = None,
           log: Log = print) -> "Image":
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


def provenance(image: "Image", ref: str) -> dict[str, Any]:
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
        "labels": {k: v for k, v in labels.items() if k.startswith(LABEL_PREFIX)},
    }


def local_images(client: "docker.DockerClient") -> Iterable["Image"]:
    """Every image built by `deepbench images build` (they carry the platform label)."""
    return client.images.list(filters={"label": LABEL_PLATFORM})


# --- wheelhouse -------------------------------------------------------------------------------

GLIBC_MINORS = range(17, 37)  # manylinux_2_17 .. manylinux_2_36 (Debian bookworm's glibc)
ARCH_OF = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
BUILD_REQUIREMENTS = ("setuptools>=68",)  # the image builds deepbench from its source, offline


def _declared() -> list[str]:
    """deepbench's requirements as the image will see them: from the source's pyproject.toml (what
    the image installs), else from the installed metadata."""
    try:
        import tomllib

        project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    except (ImportError, OSError, KeyError):
        return list(importlib.metadata.requires("deepbench") or [])
    out = list(project.get("dependencies", []))
    for extra, reqs in project.get("optional-dependencies", {}).items():
        out += [f'{r.split(";")[0].strip()}; extra == "{extra}"' for r in reqs]
    return out


def _requirement_name(spec: str) -> str:
    return re.split(r"[\s<>=!~\[;]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _harness_requirements() -> dict[str | None, list[str]]:
    """The declared requirements by extra (None: deepbench's own), in pyproject's order, without
    the host's HOST_ONLY libraries, which the harness does not import."""
    grouped: dict[str | None, list[str]] = {None: []}
    for req in _declared():
        spec, _, marker = req.partition(";")
        extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", marker)
        if extra is None and _requirement_name(spec) in HOST_ONLY:
            continue
        grouped.setdefault(extra.group(1) if extra else None, []).append(spec.strip())
    return grouped


def requirements(extras: Iterable[str]) -> list[str]:
    """What an image installs: the harness's own requirements plus those of the extras named."""
    wanted = set(extras)
    return [spec for extra, specs in _harness_requirements().items() if extra is None or extra in wanted
            for spec in specs]


def requirement_files() -> dict[str, str]:
    """requirements/<name>.txt of the build context: `base` (the harness's own) and one per extra,
    so that install-harness.sh installs base + the image's EXTRAS, whatever EXTRAS a build sets."""
    grouped = _harness_requirements()
    base = grouped.pop(None)
    files = {"base": base, **{extra: [r for r in specs if r not in base] for extra, specs in sorted(grouped.items())}}
    return {name: "".join(f"{r}\n" for r in reqs) for name, reqs in files.items()}


# pip evaluates environment markers for the machine it runs on, even with --platform: downloading
# for another architecture on this host (arm64 wheels on x86-64) it would ask for what a
# requirement needs here only (PyTorch's CUDA libraries, required on x86-64 alone) and fail. pip is
# therefore run with `platform.machine()` answering the target's machine, which is all its marker
# environment takes from this host that differs (platform_system and sys_platform are Linux on
# both); resolution, Requires-Python and the wheel tags stay pip's own.
PIP_FOR_MACHINE = ("import platform, runpy, sys; platform.machine = lambda: {machine!r}; sys.argv[0] = 'pip'; "
                   "runpy.run_module('pip', run_name='__main__', alter_sys=True)")


def wheelhouse_command(platform: Platform, out: Path, python: str, extra: list[str]) -> list[str]:
    arch = ARCH_OF.get(platform.platform_arch)
    if arch is None:
        raise UserError(f"no wheel platform known for {platform.platform_arch}")
    extras = [e for e in dockerfile_arg(platform, "EXTRAS").split(",") if e]
    tags = [f"manylinux2014_{arch}"] + [f"manylinux_2_{m}_{arch}" for m in GLIBC_MINORS]
    pip = ["-m", "pip"] if arch == host_machine.machine().lower() else ["-c", PIP_FOR_MACHINE.format(machine=arch)]
    cmd = [sys.executable, *pip, "download", "--dest", str(out), "--only-binary=:all:",
           "--implementation", "cp", "--python-version", python]
    for tag in tags:
        cmd += ["--platform", tag]
    return cmd + requirements(extras) + list(BUILD_REQUIREMENTS) + extra


def make_wheelhouse(platform: Platform, out: Path, python: str, extra: list[str], log: Log = print) -> int:
    out.mkdir(parents=True, exist_ok=True)
    cmd = wheelhouse_command(platform, out, python, extra)
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, text=True)
    if proc.returncode != 0:
        raise UserError(f"pip download failed (status {proc.returncode}, its output is above): check the "
                        f"package index is reachable from this host and the requirements exist for "
                        f"CPython {python} on {platform.platform_arch}")
    return sum(1 for p in out.iterdir() if p.name.endswith(WHEEL_SUFFIXES))


def check_harness(image: "Image", ref: str, platform: Platform, strict: bool, log: Log = print) -> None:
    """The plan this host writes must be read by the same harness: an image built from other
    deepbench source is refused (the platform's own tag) or warned about (an image the user named)."""
    theirs = (image.labels or {}).get(LABEL_HARNESS)
    ours = harness_sha256()
    if theirs == ours:
        return
    what = (f"image {ref} holds another deepbench harness ({(theirs or 'unlabelled')[:12]}) than this host's "
            f"({ours[:12]})")
    if strict:
        raise UserError(f"{what}: rebuild it (deepbench-run ... --build, or deepbench images build --platform "
                        f"{platform.name}, with --base-image/--wheelhouse as before) or run with --local")
    log(f"warning: {what}; its results come from that harness")
