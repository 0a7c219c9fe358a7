"""Stop when the process that started us dies.

deepbench-run starts the harness in a session of its own (so that a terminal's Ctrl-C reaches it
only through the runner, which waits for the run record). If the runner is killed outright
(kill -9, the out-of-memory killer), nothing would stop the harness: it would go on measuring
and appending to the folder while the user resumes. On Linux the kernel can send us a signal
when our parent dies (prctl PR_SET_PDEATHSIG); SIGTERM then stops the harness as Ctrl-C does,
after it has written its run record. The runner names itself in DEEPBENCH_PARENT_PID, so a
harness whose parent is already gone when it starts stops at once. Harnesses started by an
engine (torchrun, mpiexec) or in a container are not the runner's children: for them the lock
on the folder (kernels/folder_lock.py) keeps a second writer out instead.
It lives below both the harness and the backends: a backend's helper process (cuDNN's engine race)
ends with the harness too."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "DEEPBENCH_PARENT_PID"
PR_SET_PDEATHSIG = 1


def stop_with_parent() -> None:
    want = os.environ.get(PARENT_ENV, "")
    if want.isdigit():
        _signal_when_parent_dies(int(want), signal.SIGTERM)


def end_with_parent(parent: int) -> None:
    """A helper process of the harness (cuDNN's engine race, kernels/backends/cudnn/race_apart.py),
    started by `parent`: killed outright when the harness ends, however it ends (nothing to save)."""
    _signal_when_parent_dies(parent, signal.SIGKILL)


def _signal_when_parent_dies(parent: int, sig: signal.Signals) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before we asked
        os.kill(os.getpid(), sig)
