"""The bundle's SHA-256 manifest, and a safe scan of an untrusted bundle folder.

The manifest is `sha256sum`'s format ("<hex>  <path>", sorted), so anyone can run
`sha256sum -c MANIFEST.sha256` inside a bundle without this tool. The scan never follows a link
and never reads a file before its size is known to be within the limits."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ...kernels.provenance import sha256_file
from .layout import MANIFEST, Limits

LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")
SAFE_NAME = re.compile(r"^[A-Za-z0-9._+@=-]+$")  # path segments a bundle may use (no spaces, no controls)


@dataclass
class Scan:
    """Regular files found (relative POSIX path -> size) and what was wrong with the rest."""

    files: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)


def scan(root: Path, limits: Limits) -> Scan:
    out = Scan()
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in sorted(dirnames):
            rel = (base / name).relative_to(root).as_posix()
            if (base / name).is_symlink():
                out.problems.append(
                    (rel, f"is a symbolic link (to {os.readlink(base / name)}): links are not allowed in a bundle")
                )
                dirnames.remove(name)  # os.walk does not follow it; make sure nothing below is read
        for name in sorted(filenames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            try:
                st = path.lstat()
            except OSError as exc:
                out.problems.append((rel, f"cannot be read: {exc.strerror}"))
                continue
            if stat.S_ISLNK(st.st_mode):
                out.problems.append(
                    (rel, f"is a symbolic link (to {os.readlink(path)}): links are not allowed in a bundle")
                )
                continue
            if not stat.S_ISREG(st.st_mode):
                out.problems.append((rel, "is not a regular file (a device, socket or pipe)"))
                continue
            if not all(SAFE_NAME.match(part) for part in PurePosixPath(rel).parts):
                out.problems.append((repr(rel), "has characters a bundle's file names may not use"))
                continue
            if st.st_size > limits.max_file_bytes:
                out.problems.append((rel, f"is {st.st_size} bytes, over the limit of {limits.max_file_bytes}"))
                continue
            total += st.st_size
            out.files[rel] = st.st_size
            if len(out.files) > limits.max_files:
                out.problems.append((".", f"holds more than {limits.max_files} files; not read further"))
                return out
    if total > limits.max_total_bytes:
        out.problems.append((".", f"holds {total} bytes, over the limit of {limits.max_total_bytes}"))
    return out


def unsafe_path(text: str) -> str | None:
    """Why a manifest path must not be used, or None if it names a file inside the bundle."""
    if not text or "\\" in text or "\x00" in text:
        return "is empty or holds a backslash or NUL"
    p = PurePosixPath(text)
    if p.is_absolute():
        return "is absolute: it escapes the bundle"
    if any(part in ("..", ".") for part in text.split("/")) or "" in text.split("/"):
        return "has '..', '.' or empty segments: it escapes the bundle or is not canonical"
    return None


def _canonical(digests: dict[str, str]) -> str:
    return "".join(f"{digest}  {rel}\n" for rel, digest in sorted(digests.items()))


def write_manifest(root: Path) -> list[str]:
    """Hash every file under `root` (but the manifest) into MANIFEST.sha256; returns the paths."""
    paths = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != MANIFEST
    )
    (root / MANIFEST).write_text(_canonical({rel: sha256_file(root / rel) for rel in paths}))
    return paths


def check_manifest(root: Path, found: Scan, limits: Limits) -> list[tuple[str, str]]:
    """Compare the manifest with the files found: every file listed, present and unchanged."""
    problems: list[tuple[str, str]] = []
    if MANIFEST not in found.files:
        return [(MANIFEST, "is missing: a bundle lists the SHA-256 of every file in it")]
    if found.files[MANIFEST] > limits.max_json_bytes:
        return [(MANIFEST, f"is over {limits.max_json_bytes} bytes")]
    try:
        text = (root / MANIFEST).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return [(MANIFEST, "is not UTF-8 text")]
    listed: dict[str, str] = {}
    real_root = root.resolve()
    for n, line in enumerate(text.split("\n"), 1):  # sha256sum's lines: "\n" only (splitlines knows 8 more)
        if not line.strip():
            continue
        m = LINE.match(line)
        if not m:
            problems.append((f"{MANIFEST} line {n}", "is not '<64 hex digits>  <path>'"))
            continue
        digest, rel = m.groups()
        why = unsafe_path(rel)
        if why is None and not (root / rel).resolve().is_relative_to(real_root):
            why = "resolves outside the bundle (through a link): it escapes the bundle"
        if why:
            problems.append((f"{MANIFEST} line {n}", f"path {rel!r} {why}"))
            continue
        if rel == MANIFEST:
            problems.append((f"{MANIFEST} line {n}", "lists the manifest itself"))
        elif rel in listed:
            problems.append((f"{MANIFEST} line {n}", f"lists {rel} twice"))
        else:
            listed[rel] = digest
    if not problems and text != _canonical(listed):
        problems.append(
            (
                MANIFEST,
                "is not in the form deepbench submit writes ('<sha256>  <path>' lines, sorted by "
                "path, each ending in a newline): it was edited",
            )
        )
    for rel, digest in listed.items():
        if rel not in found.files:
            exists = os.path.lexists(root / rel)
            problems.append(
                (
                    rel,
                    "is listed in the manifest but is not a readable regular file in the bundle"
                    if exists
                    else "is listed in the manifest but missing from the bundle (file removed?)",
                )
            )
        elif _digest(root / rel) != digest:
            problems.append((rel, "its SHA-256 differs from the manifest's (the file changed after submission)"))
    for rel in found.files:
        if rel != MANIFEST and rel not in listed:
            problems.append((rel, "is not in the manifest (a file added after submission?)"))
    return problems


def _digest(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except OSError:
        return None  # unreadable: reported as differing from the manifest
