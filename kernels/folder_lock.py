"""One writer per results folder: an exclusive lock on a file in the folder, held for as long as
the writer lives.

The lock is `flock(2)` on an open file: the kernel releases it when the process ends, however it
ends (kill -9, a crash, the out-of-memory killer), so a stale lock can never block a later run;
the file's content (the holder's PID, host and role) only serves the message that names the
holder. Two locks guard a folder: `deepbench-run` (or `deepbench verify`) holds `.lock` for the
whole run, and the harness process that appends results holds `.harness.lock` while it runs,
which also covers a harness left running after its deepbench-run was killed, and harnesses
started by an engine without deepbench-run (deepbench launch-command). fcntl's flock is the
standard library's; it works across bind mounts (a container's /results is the host's inode)
and on NFS (emulated with POSIX byte-range locks by Linux).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path

RUN_LOCK = ".lock"
HARNESS_LOCK = ".harness.lock"


class Locked(Exception):
    """Another live process holds the lock; `holder` is what it wrote about itself."""

    def __init__(self, path: Path, holder: dict) -> None:
        self.path, self.holder = path, holder
        super().__init__(f"{path.parent} is in use by {describe(holder)}")


def describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "another process (it is starting: its PID is not written yet)"
    where = holder.get("host") or "?"
    text = f"{holder.get('role', 'a process')} (PID {holder['pid']} on {where}"
    if holder.get("in_container"):
        text += ", in a container"
    return text + ")"


class FolderLock:
    """An exclusive, non-blocking flock on `folder/name`; held until release() or process exit."""

    def __init__(self, folder: Path, name: str, role: str) -> None:
        self.path = folder / name
        self.role = role
        self._fd: int | None = None

    def acquire(self) -> FolderLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise Locked(self.path, holder) from None
        except OSError:
            os.close(fd)
            raise
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "role": self.role,
            "in_container": os.path.exists("/.dockerenv") or os.environ.get("DEEPBENCH_IN_CONTAINER") == "1",
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same, only its message lacks the PID
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def probe(folder: Path, name: str) -> dict | None:
    """Who holds the lock `folder/name` now (None: nobody), without keeping it."""
    if not (folder / name).exists():
        return None
    try:
        with FolderLock(folder, name, "probe"):
            return None
    except Locked as exc:
        return exc.holder


def peek(folder: Path, name: str) -> dict | None:
    """Who holds the lock `folder/name` now (None: nobody), read without writing a byte: a shared lock
    tried on a read-only descriptor and dropped (for readers of a folder, which must leave it as it is,
    and may not be allowed to write there)."""
    try:
        fd = os.open(folder / name, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read(fd)
    finally:
        os.close(fd)  # drops the shared lock, if it was taken
    return None
