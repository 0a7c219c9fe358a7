"""Where a command writes, checked before anything is measured or rendered: a folder that is a
file, a read-only place, one without permission or without space is one line and exit status
2, for every command that writes (deepbench-run, verify, submit, report, compare, fastest,
models extract)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from ..kernels.results_file import free_bytes
from .errors import UserError

# Less free space than this is refused at the door: a run's plan, record and first results need
# about 20 KB; a folder on a full disk would fail at the first write.
MIN_FREE_BYTES = 1 << 20


def _why(exc: OSError) -> str:
    if exc.errno == errno.EROFS:
        return "it is on a read-only filesystem"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on its disk"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    return exc.strerror or str(exc)


def _probe(folder: Path, option: str, shown: Path) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UserError(f"{option} {shown}: cannot write there ({_why(exc)})") from None
    free = free_bytes(folder)
    if free is not None and free < MIN_FREE_BYTES:
        raise UserError(f"{option} {shown}: no space left on its disk: {free:,} bytes are free, at least "
                        f"{MIN_FREE_BYTES:,} are needed; free some space or choose another place")


def writable_folder(path: Path, option: str = "--out") -> Path:
    """Create the folder `path` (with its parents) if needed and make sure files can be written in it."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {path} is a file, not a folder: give a folder (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create the folder ({_why(exc)})") from None
    _probe(path, option, path)
    return path


def writable_file(path: Path, option: str = "--out") -> Path:
    """Make sure the file `path` can be written: not a folder, its folder there (made if missing) and writable."""
    if path.is_dir():
        raise UserError(f"{option} {path} is a folder: give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"{option} {path}: cannot write there (permission denied or read-only)")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise UserError(f"{option} {path}: {parent} is a file, not a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create its folder ({_why(exc)})") from None
    _probe(parent, option, path)
    return path
