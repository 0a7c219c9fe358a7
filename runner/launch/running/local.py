"""--local: the harness in a subprocess of the host's Python, no container."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from deepbench.kernels.lifeline import PARENT_ENV

HARNESS_MODULE = "deepbench.kernels.harness"
LOG_FILE = "harness.log"


def default_stop_signals() -> None:
    """In the child, before it runs: stop signals back to their default dispositions. A runner
    started as a shell's background job has SIGINT ignored, and a child inherits that; an engine
    (torchrun, mpirun) that starts the ranks must see the stop the runner forwards. (The harness
    installs its own handlers for all three at its start.)"""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


class LocalHarness:
    """The harness as a child process in its own session (Ctrl-C reaches it through us)."""

    def __init__(
        self, plan_path: Path, outdir: Path, env: dict[str, str] | None = None, argv: list[str] | None = None
    ) -> None:
        """`argv` replaces the plain harness command (e.g. an MPI or torchrun engine starting ranks).
        The plain harness is told our PID so that it stops if we are killed (kernels/lifeline.py)."""
        self.log_path = outdir / LOG_FILE
        self._log = self.log_path.open("a")
        lifeline = {} if argv else {PARENT_ENV: str(os.getpid())}
        self.proc = subprocess.Popen(
            argv or [sys.executable, "-m", HARNESS_MODULE, str(plan_path), str(outdir)],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **lifeline, **(env or {})},
            preexec_fn=default_stop_signals,
        )

    def lines(self) -> Iterator[str]:
        assert self.proc.stdout is not None
        yield from self.proc.stdout

    def interrupt(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self, timeout: float | None = None) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.flush()

    def stderr_tail(self) -> str:
        self._log.flush()
        try:
            return self.log_path.read_text()[-4000:]
        except OSError:
            return ""
