"""What the harness and the host say to each other: the events the harness prints (one JSON
object per line on its stdout) and the exit statuses of both the harness and `deepbench-run`.

Both sides import this module, so a new event or status is added in one place and neither side
can misspell one. It imports nothing of deepbench's, so the host loads it without the harness's
libraries. The strings and numbers are part of the contract with harnesses in published images:
an event's name and a status's number never change, only new ones are added.
"""

from __future__ import annotations

import json
from enum import Enum, IntEnum
from typing import Any

EVENT_KEY = "event"  # the field of every event line that names it


class Event(str, Enum):
    """The events of a harness run, in the order they come."""

    FACTS = "facts"  # the device is open: its name
    START = "start"  # a kernel begins (id, index, total): the host's per-kernel timeout starts
    DONE = "done"  # a kernel's result is written (id, status, median_us, reason)
    ERROR = "error"  # the harness cannot go on (message; kind for some): said before it exits
    RESTART = "restart"  # a rank is gone: start every rank again (reason)
    END = "end"  # the run record is written (state)


class ErrorKind(str, Enum):
    """The `kind` of an `error` event, where the host acts on it."""

    LOCKED = "locked"  # another harness writes to the folder
    WRITE = "write"  # a result could not be written (needed_bytes, free_bytes)


class ExitCode(IntEnum):
    """Exit statuses of the harness and of `deepbench-run` (the host maps the harness's onto its
    own: a full disk is 74 for both, a locked folder is the runner's usage error 2). Stopped by a
    signal, `deepbench-run` exits 128 + its number (runner/launch/running/signals.py)."""

    OK = 0
    KERNEL_FAILURES = 1  # deepbench-run: some kernel failed or timed out
    USAGE = 2  # deepbench-run: a mistake the user can fix (also: the folder is another run's)
    BACKEND_UNAVAILABLE = 3  # harness: the backend cannot load on this machine
    WRITE_FAILED = 74  # a result or the run record could not be written (sysexits' EX_IOERR): disk full ...
    LOCKED = 75  # harness: another harness writes to the same results folder (sysexits' EX_TEMPFAIL)
    INTERRUPTED = 130  # harness: SIGINT, SIGTERM or SIGHUP; stopped after writing the run record


def event_line(event: Event, **fields: Any) -> str:
    """One event as the harness prints it (no newline): {"event": NAME, ...fields}."""
    return json.dumps({EVENT_KEY: event.value, **fields})


def parse_event(line: str) -> dict[str, Any] | None:
    """An event line as a dict whose "event" is an `Event`; None for anything else the harness
    printed (a library's chatter, an event of a newer harness this host does not know)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    try:
        doc[EVENT_KEY] = Event(doc.get(EVENT_KEY))
    except ValueError:
        return None
    return doc
