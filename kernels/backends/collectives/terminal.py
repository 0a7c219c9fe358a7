"""Where a rank says why it stops. A rank other than 0 writes its stderr to its own log
(kernels/harness keeps it under ranks/rank-K/); the file descriptor of the terminal it was started
with is kept in TERMINAL_FD_ENV, so a rank that stops still says why where the user looks: the
bare srun or mpirun line has no deepbench-run to relay it."""

from __future__ import annotations

import os
import sys

TERMINAL_FD_ENV = "DEEPBENCH_TERMINAL_FD"


def say_on_terminal(line: str) -> None:
    """`line` on stderr, and on the terminal the rank was started with where stderr is its log."""
    print(line, file=sys.stderr, flush=True)
    fd = os.environ.get(TERMINAL_FD_ENV)
    if fd and fd.isdigit():
        try:
            os.write(int(fd), (line + "\n").encode())
        except OSError:
            pass  # the terminal is gone: the log has it
