"""Where a command writes, checked before anything is measured or rendered: a folder that is a
file, a read-only place, one without permission or without space is one line and exit status
2, for every command that writes (deepbench-run, verify, submit, report, compare, fastest,
models extract).

A run writes its files (plan.json, run.json, results.jsonl, harness.log, facts.json, its locks)
straight into its folder, so that folder is never one of the places no tool should fill
(`guarded_place`: the root, the system's own folders, the user's home and the folders above it)
nor a folder that holds other things (`refuse_foreign`): `deepbench-run --local --out /` once wrote
all of them into `/`."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..kernels.results_file import free_bytes
from .argv_text import shown
from .errors import UserError

# Less free space than this is refused at the door: a run's plan, record and first results need
# about 20 KB; a folder on a full disk would fail at the first write.
MIN_FREE_BYTES = 1 << 20
# The operating system's own trees (the Filesystem Hierarchy Standard's): neither they nor anything
# inside them is a place for results.
SYSTEM_TREES = ("/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr")
# Folders that hold others' folders (users', mounts', packages', every user's scratch): a run may go
# inside them, never straight into them.
SYSTEM_FOLDERS = ("/dev", "/home", "/media", "/mnt", "/opt", "/root", "/run", "/srv", "/tmp", "/var", "/var/tmp")
LISTED = 3  # foreign entries a refusal names


def why_failed(exc: OSError) -> str:
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
        raise UserError(f"{option} {shown}: cannot write there ({why_failed(exc)})") from None
    free = free_bytes(folder)
    if free is not None and free < MIN_FREE_BYTES:
        raise UserError(
            f"{option} {shown}: no space left on its disk: {free:,} bytes are free, at least "
            f"{MIN_FREE_BYTES:,} are needed; free some space or choose another place"
        )


def writable_folder(path: Path, option: str = "--out") -> Path:
    """Create the folder `path` (with its parents) if needed and make sure files can be written in it."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {path} is a file, not a folder: give a folder (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create the folder ({why_failed(exc)})") from None
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
        raise UserError(f"{option} {path}: cannot create its folder ({why_failed(exc)})") from None
    _probe(parent, option, path)
    return path


# ----- where a folder of the tool's own files may go -----------------------------------------------
def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or inner.is_relative_to(outer)


def guarded_place(path: Path) -> str | None:
    """What `path` is, when no command may write its own files straight into it: the root folder, a
    system folder (or one inside the system's trees), the user's home or a folder that holds it; None
    for any other place."""
    real = path.resolve()
    if real == Path("/").resolve():
        return "the root folder"
    try:
        home: Path | None = Path.home().resolve()
    except RuntimeError:  # no HOME and no password entry: there is no home folder to guard
        home = None
    if real == home:
        return "your home folder"
    if home is not None and _within(home, real):
        return f"a folder that holds your home folder ({home})"
    for tree in SYSTEM_TREES:
        if _within(real, Path(tree).resolve()):
            return f"a system folder (inside {tree})"
    if any(real == Path(folder).resolve() for folder in SYSTEM_FOLDERS):
        return "a system folder"
    return None


def refuse_guarded(path: Path, option: str = "--out") -> None:
    """One line (exit 2) when `path` is a guarded place (guarded_place), before anything is made."""
    place = guarded_place(path)
    if place is not None:
        raise UserError(
            f"{option} {path} is {place}: a run writes plan.json, run.json, results.jsonl, its logs and "
            f"its locks straight into {option}; give a new or empty folder for them (nothing was written)"
        )


def _listed(names: list[str]) -> str:
    listed = ", ".join(shown(name) for name in names[:LISTED])  # a name of other bytes as the shell writes it
    return listed + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


def refuse_foreign(path: Path, is_own: Callable[[str], bool], option: str = "--out") -> None:
    """One line (exit 2) when the folder `path` exists and holds an entry that is not one of the tool's
    own (`is_own`, by name): a run's files are never mixed into a folder of other things."""
    if not path.is_dir():
        return
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot read the folder ({why_failed(exc)})") from None
    other = [name for name in names if not is_own(name)]
    if other:
        raise UserError(
            f"{option} {path} already holds files that are not a deepbench run's ({_listed(other)}): a run "
            f"goes into a new or empty folder (or continues its own with --resume); choose another {option} "
            "(nothing was written)"
        )


# ----- replacing a folder the tool wrote (--force) ----------------------------------------------


def check_replaceable(
    out: Path,
    own_files: set[str] | None,
    keep: tuple[Path, ...] = (),
    what: str = "a folder this tool wrote",
    option: str = "--out",
) -> None:
    """Refuse (one line, exit 2) to replace `out` unless it is a folder this tool wrote and holds
    nothing else: `own_files` is the set of relative paths the tool's own index (a bundle's
    manifest) says it wrote, None when there is no such index. Never the home folder, the root,
    the working folder or a folder holding it, nor one that holds (or lies inside) a path in
    `keep` (the run being bundled): --force replaces output, it never deletes what the user made."""
    if out.is_symlink():
        raise UserError(f"{option} {out} is a symbolic link: --force replaces only a folder this tool wrote")
    real = out.resolve()
    home = Path.home().resolve()
    guarded = [
        (home, "your home folder"),
        (Path("/").resolve(), "the root folder"),
        (Path.cwd().resolve(), "the working folder"),
    ]
    for path, name in guarded:
        if _within(path, real):
            raise UserError(f"{option} {out} is or holds {name}: --force replaces only {what}; nothing was removed")
    for path in keep:
        p = path.resolve()
        if _within(p, real) or _within(real, p):
            raise UserError(
                f"{option} {out} is, holds or lies inside {path}: --force never replaces the run it "
                "bundles; choose another --out (nothing was removed)"
            )
    if own_files is None:
        raise UserError(
            f"{option} {out} is not {what} (no index of the files it wrote): --force replaces only "
            "such a folder; choose another --out or remove it yourself (nothing was removed)"
        )
    present: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
        base = Path(dirpath)
        for name in dirnames:
            if (base / name).is_symlink():
                filenames.append(name)  # a link is a file here: never followed, and not the tool's
        present.update((base / name).relative_to(real).as_posix() for name in filenames)
    other = sorted(present - own_files)
    if other:
        listed = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise UserError(
            f"{option} {out} holds files this tool did not write ({listed}): --force replaces only "
            f"{what}; choose another --out (nothing was removed)"
        )


def remove_own_files(folder: Path, own_files: set[str]) -> None:
    """Remove the files `own_files` names (the tool's own, checked by check_replaceable) and then
    the folders left empty, bottom up; anything else stays (rmtree would take it too)."""
    for rel in own_files:
        path = folder / rel
        if path.is_file() and not path.is_symlink():
            path.unlink()
    for dirpath, _dirs, _files in sorted(os.walk(folder, topdown=False), key=lambda w: -len(w[0])):
        try:
            Path(dirpath).rmdir()
        except OSError:  # not empty: something that is not the tool's stays
            pass
