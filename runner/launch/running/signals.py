"""Stop signals: SIGTERM (kill, systemd, Slurm's scancel) and SIGHUP (a closed terminal or SSH
session) stop a run the way Ctrl-C does: the harness is asked to stop, finished kernels are
kept, run.json says `interrupted`, and the exit status is 128 + the signal's number (130, 143,
129), as a shell reports a process a signal ended.

A signal raises `Stopped` (a KeyboardInterrupt, so every place that already handles Ctrl-C
handles these too) once; further signals while the run winds down are noted and otherwise
ignored, so that a second Ctrl-C or a systemd stop-then-kill cannot cut the run record short.
A signal the process was started ignoring (SIGHUP under nohup) stays ignored.

Where a stop must not cut a step in two (a harness started but not yet known to the supervisor, which
would then never be told to stop), the step runs `held()`: a stop signal that comes within it is raised
at its end.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SIGNAL_EXIT_BASE = 128


@dataclass
class _Hold:
    """How many `held()` blocks are open, and the stop signal that came meanwhile."""

    depth: int = 0
    pending: int | None = None


_HOLD = _Hold()


class Stopped(KeyboardInterrupt):
    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(exc: BaseException | None = None, signum: int | None = None) -> int:
    """128 + the signal that stopped the run (SIGINT when it is not known)."""
    num = signum if signum is not None else getattr(exc, "signum", signal.SIGINT)
    return SIGNAL_EXIT_BASE + int(num)


@contextmanager
def stop_on_signals() -> Iterator[list[int]]:
    """Within the block, the first stop signal raises Stopped; the list yielded holds every stop
    signal received (the first decides the exit status)."""
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        if len(received) == 1:
            if _HOLD.depth:
                _HOLD.pending = signum  # raised when the held step ends
                return
            raise Stopped(signum)

    previous = {}
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue  # ignored on purpose (nohup, a background job): keep it so
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: leave the defaults
            pass
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def held() -> Iterator[None]:
    """Within the block, a stop signal waits: it is raised as Stopped when the block ends (unless the
    block itself fails: its error goes on, and the signal is spent, as it would be on any error)."""
    _HOLD.depth += 1
    try:
        yield
    except BaseException:
        _HOLD.pending = None
        raise
    finally:
        _HOLD.depth -= 1
    if not _HOLD.depth and _HOLD.pending is not None:
        signum, _HOLD.pending = _HOLD.pending, None
        raise Stopped(signum)
