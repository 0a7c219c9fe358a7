"""The platform images' Python packages, locked: what an image holds is decided here, not by
whatever a package index offers on the day it is built.

Per image folder (images/<vendor>/):
  requirements.in    what the image installs (the harness's packages and its platform's
                     runtimes), by hand: changing an image's package set is changing this file
  uv.toml            the interpreter and platform the lock is resolved for (uv's own config)
  requirements.lock  every package and dependency pinned (==) with the SHA-256 of its files,
                     written by `uv pip compile --generate-hashes` (`deepbench images lock`)

Both ways of building install the lock with `pip install --require-hashes`: from a wheelhouse
(made by `pip download --require-hashes` from the same lock) or online. A file whose hash the
lock does not list is refused by pip, so two builds from one lock and one base hold the same
packages. uv is used because it resolves for another interpreter and platform than the host's
(an arm64 lock on an x86 host); pip-tools resolves for the running interpreter only."""

from __future__ import annotations

import hashlib
import platform as host_machine
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ...errors import UserError
from ...platforms import Platform
from .image_sources import REPO, dockerfile_arg, vendor_dir

LOCK_FILE = "requirements.lock"
INPUT_FILE = "requirements.in"
UV_CONFIG = "uv.toml"
# deepbench's dependencies that only the host side imports (the terminal, Docker, workbooks and
# charts): no image lock may hold them (tests/test_containers.py checks the image has none).
HOST_ONLY = frozenset(("rich", "docker", "openpyxl", "plotly"))
WHEEL_SUFFIXES = (".whl", ".tar.gz", ".zip")
GLIBC_MINORS = range(17, 37)  # manylinux_2_17 .. manylinux_2_36 (Debian bookworm's glibc)
ARCH_OF = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
HASH = re.compile(r"--hash[= ]sha256:([0-9a-f]{64})")

Log = Callable[[str], None]


@dataclass(frozen=True)
class Pin:
    """One locked package: name==version and the SHA-256 of each of its files."""

    name: str
    version: str
    hashes: frozenset[str]


def lock_path(platform: Platform) -> Path:
    return vendor_dir(platform) / LOCK_FILE


def _logical_lines(text: str) -> list[str]:
    return [
        line.split(" #", 1)[0].strip()
        for line in text.replace("\\\n", " ").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def read_lock(path: Path) -> list[Pin]:
    """The lock's pins; a lock that pins nothing, or a line without == and a hash, is refused."""
    if not path.is_file():
        raise UserError(f"{path} is missing: make it with deepbench images lock --platform {path.parent.name}")
    pins = []
    for line in _logical_lines(path.read_text()):
        if line.startswith("-"):
            continue  # pip options (an index), not a package
        spec = line.split("--hash", 1)[0].strip()
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            raise UserError(
                f"{path}: '{spec}' is not a requirement; regenerate it with deepbench images lock"
            ) from None
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        hashes = frozenset(HASH.findall(line))
        if len(pinned) != 1 or not hashes:
            raise UserError(f"{path}: {spec} is not pinned with its hashes; regenerate it with deepbench images lock")
        pins.append(Pin(canonicalize_name(req.name), pinned[0], hashes))
    if not pins:
        raise UserError(f"{path} pins no package; regenerate it with deepbench images lock")
    return pins


def lock_sha256(platform: Platform) -> str:
    return hashlib.sha256(lock_path(platform).read_bytes()).hexdigest()


def target(platform: Platform) -> tuple[str, str]:
    """(CPython version, uv's platform) the platform's lock is resolved for, from its uv.toml."""
    import tomllib  # type: ignore[import-not-found,unused-ignore]  # 3.11 on: here only, so 3.10 imports the package

    path = vendor_dir(platform) / UV_CONFIG
    try:
        pip = tomllib.loads(path.read_text())["pip"]
        return str(pip["python-version"]), str(pip["python-platform"])
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path} does not say the lock's python-version and python-platform ({exc})") from None


def stale(platform: Platform, lock: Path | None = None) -> list[str]:
    """What the lock (the platform's, or `lock`) does not satisfy of requirements.in (empty: the
    lock is current), and any host-only library it holds."""
    pins = {p.name: p for p in read_lock(lock or lock_path(platform))}
    python, _ = target(platform)
    env = {key: str(value) for key, value in default_environment().items()}  # all strings already
    env.update(python_version=python, python_full_version=f"{python}.0")
    problems = []
    for line in _logical_lines((vendor_dir(platform) / INPUT_FILE).read_text()):
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req} is not in the lock")
        elif not req.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{req} is not met by the lock's {pin.name}=={pin.version}")
    problems += [f"{name} is a host-only library: no image needs it" for name in sorted(HOST_ONLY & set(pins))]
    return problems


def uv_binary() -> str:
    """uv from its Python package (pip install uv), else from PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise UserError(
        "locking needs uv, which resolves for the image's interpreter and platform: "
        "pip install uv (or pip install 'deepbench[lock]')"
    )


def lock_command(
    platform: Platform, out: Path, wheels: Path | None = None, upgrade: bool = False, extra: list[str] | None = None
) -> list[str]:
    """uv pip compile for the platform's lock, run from the repository root. The Dockerfile's
    EXTRA_INDEX_URL (PyTorch's CPU index for Intel) is searched too, unless `wheels` holds the
    packages found there (a folder of wheels: offline, or where that index cannot be reached)."""
    rel = vendor_dir(platform).relative_to(REPO)
    again = f"deepbench images lock --platform {platform.name}" + (f" --wheels {wheels}" if wheels else "")
    cmd = [
        uv_binary(),
        "pip",
        "compile",
        "--config-file",
        str(rel / UV_CONFIG),
        str(rel / INPUT_FILE),
        "--output-file",
        str(out),
        "--custom-compile-command",
        again,
        "--quiet",
    ]
    index = dockerfile_arg(platform, "EXTRA_INDEX_URL")
    if wheels is not None:
        cmd += ["--find-links", str(wheels.resolve())]
    elif index:
        cmd += ["--index", index]
    return cmd + (["--upgrade"] if upgrade else []) + list(extra or [])


def lock(
    platform: Platform,
    out: Path | None = None,
    wheels: Path | None = None,
    upgrade: bool = False,
    extra: list[str] | None = None,
    log: Log = print,
) -> Path:
    """(Re)write the platform's lock (or `out`); uv keeps the pins it can unless `upgrade`."""
    path = (out or lock_path(platform)).resolve()
    if wheels is not None and not wheels.is_dir():
        raise UserError(f"--wheels {wheels} is not a folder")
    cmd = lock_command(platform, path, wheels, upgrade, extra)
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True)
    if proc.returncode != 0:
        last = [line for line in proc.stderr.splitlines() if line.strip()][-3:]
        raise UserError(
            f"uv could not lock {platform.name}'s packages: {' / '.join(last) or proc.returncode} "
            f"(is the package index reachable? offline, pass --wheels DIR)"
        )
    read_lock(path)  # what was written is a usable lock
    return path


# --- wheelhouse: the lock's files, downloaded on the host for an offline build -------------------

# pip evaluates environment markers for the machine it runs on, even with --platform: downloading
# for another architecture on this host (arm64 wheels on x86-64) it would ask for what a
# requirement needs here only (PyTorch's CUDA libraries, required on x86-64 alone) and fail. pip is
# therefore run with `platform.machine()` answering the target's machine, which is all its marker
# environment takes from this host that differs (platform_system and sys_platform are Linux on
# both); resolution, Requires-Python and the wheel tags stay pip's own.
PIP_FOR_MACHINE = (
    "import platform, runpy, sys; platform.machine = lambda: {machine!r}; sys.argv[0] = 'pip'; "
    "runpy.run_module('pip', run_name='__main__', alter_sys=True)"
)


def wheelhouse_command(
    platform: Platform, out: Path, python: str | None = None, wheels: Path | None = None, extra: list[str] | None = None
) -> list[str]:
    arch = ARCH_OF.get(platform.platform_arch)
    if arch is None:
        raise UserError(f"no wheel platform known for {platform.platform_arch}")
    python = python or target(platform)[0]
    tags = [f"manylinux2014_{arch}"] + [f"manylinux_2_{m}_{arch}" for m in GLIBC_MINORS]
    pip = ["-m", "pip"] if arch == host_machine.machine().lower() else ["-c", PIP_FOR_MACHINE.format(machine=arch)]
    cmd = [
        sys.executable,
        *pip,
        "download",
        "--dest",
        str(out),
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python,
        "--require-hashes",
        "-r",
        str(lock_path(platform)),
    ]
    for tag in tags:
        cmd += ["--platform", tag]
    index = dockerfile_arg(platform, "EXTRA_INDEX_URL")
    if wheels is not None:
        cmd += ["--find-links", str(wheels)]
    elif index:
        cmd += ["--extra-index-url", index]
    return cmd + list(extra or [])


def make_wheelhouse(
    platform: Platform,
    out: Path,
    python: str | None = None,
    wheels: Path | None = None,
    extra: list[str] | None = None,
    log: Log = print,
) -> int:
    read_lock(lock_path(platform))
    out.mkdir(parents=True, exist_ok=True)
    cmd = wheelhouse_command(platform, out, python, wheels, extra)
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, text=True)
    if proc.returncode != 0:
        raise UserError(
            f"pip download failed (status {proc.returncode}, its output is above): check the "
            f"package index is reachable from this host (or pass --wheels DIR) and the locked files "
            f"exist for CPython {python or target(platform)[0]} on {platform.platform_arch}"
        )
    return sum(1 for p in out.iterdir() if p.name.endswith(WHEEL_SUFFIXES))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def select_wheels(platform: Platform, wheelhouse: Path) -> list[Path]:
    """The wheelhouse's files that the lock names (by hash), one or more per pin; a pin with
    none is said before any build starts. Other files stay out of the build context."""
    if not wheelhouse.is_dir():
        raise UserError(
            f"--wheelhouse {wheelhouse} is not a folder (make one with: deepbench images "
            f"wheelhouse --platform {platform.name} --out {wheelhouse})"
        )
    pins = read_lock(lock_path(platform))
    wanted = {h for p in pins for h in p.hashes}
    chosen = {_sha256(p): p for p in sorted(wheelhouse.iterdir()) if p.name.endswith(WHEEL_SUFFIXES)}
    chosen = {h: p for h, p in chosen.items() if h in wanted}
    missing = [f"{p.name}=={p.version}" for p in pins if not p.hashes & set(chosen)]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UserError(
            f"--wheelhouse {wheelhouse} lacks the locked files of {shown}: make it from the lock with "
            f"deepbench images wheelhouse --platform {platform.name} --out {wheelhouse}"
        )
    return sorted(chosen.values())
