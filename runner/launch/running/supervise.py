"""Drive the harness to the end of a plan, whatever happens to it.

The harness runs in another process (a subprocess with --local, a container otherwise) and
prints one JSON event per line. The supervisor shows progress, and when the harness dies in the
middle of a kernel (a crash, an out-of-memory kill) or a kernel outlasts the per-kernel timeout,
it records that kernel as `failed` or `timeout` on the host and starts the harness again, which
skips every kernel already in results.jsonl. Ctrl-C (and SIGTERM or SIGHUP, runner/launch/running/signals.py)
is passed on to the harness, which writes its run record before it exits, so nothing measured
is lost. A harness that cannot write a result (a full disk) stops the run with what it needs;
with several ranks, the first rank that failed is named with its reason and log, and ranks that
could not even meet (their communicator's setup failed) are started again, at most twice."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from deepbench.kernels.harness.protocol import Event, ExitCode, parse_event
from deepbench.kernels.harness.ranks import rank_failures
from deepbench.kernels.precision import PRECISIONS
from deepbench.kernels.results import RESULTS_FILE, KernelResult, Plan, PlanItem, RunState, Status, utcnow
from deepbench.kernels.results_file import append_result, scan

from .run_folder import write_failure
from .signals import held

GRACE_S = 30.0
POLL_S = 0.5
SETUP_RETRIES = 2  # ranks whose communicator could not be set up are started again this often


class HarnessProcess(Protocol):
    """A running harness: its stdout lines, and ways to stop it."""

    def lines(self) -> Iterator[str]: ...
    def interrupt(self) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def stderr_tail(self) -> str: ...


Starter = Callable[[], HarnessProcess]


@dataclass
class Outcome:
    state: RunState  # complete, interrupted, failed
    message: str = ""
    signum: int | None = None  # the signal that interrupted the run
    exit_code: int = ExitCode.KERNEL_FAILURES  # for `failed`: WRITE_FAILED, USAGE (another harness holds
    # the folder), else KERNEL_FAILURES


class Progress(Protocol):
    def started(self, event: dict) -> None: ...
    def finished(self, event: dict) -> None: ...
    def note(self, text: str) -> None: ...


def _reader(proc: HarnessProcess, q: queue.Queue[str | None]) -> None:
    try:
        for line in proc.lines():
            q.put(line)
    finally:
        q.put(None)


def host_result(item: PlanItem, status: Status, reason: str, backend: str) -> KernelResult:
    now = utcnow()
    return KernelResult(
        id=item.id,
        kernel=item.kernel,
        precision=PRECISIONS[item.precision],
        backend=backend,
        status=status,
        reason=reason,
        started_at=now,
        ended_at=now,
    )


def supervise(plan: Plan, outdir: Path, start: Starter, progress: Progress) -> Outcome:
    """Run the plan to completion, restarting the harness after a kernel that killed it."""
    return _Supervisor(plan, outdir, start, progress).run()


@dataclass
class _Harness:
    """One start of the harness, as its events are read: the kernel it is on and that kernel's
    deadline, its last error event, whether it asked to be started again (its ranks' communicator
    broke), and how many kernels it finished (a death between kernels after progress restarts)."""

    proc: HarnessProcess
    started: float
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    current: str | None = None
    deadline: float | None = None
    error: dict = field(default_factory=dict)
    restart: bool = False
    finished_here: int = 0

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(GRACE_S)

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline


@dataclass
class _Supervisor:
    plan: Plan
    outdir: Path
    start: Starter
    progress: Progress
    setup_failures: int = 0  # starts whose ranks could not meet

    def run(self) -> Outcome:
        while True:
            done = {r.id for r in scan(self.outdir / RESULTS_FILE).results}
            if all(item.id in done for item in self.plan.items):
                return Outcome("complete")
            started = time.time()  # before the start: rank failures it records are after this
            harness = None
            try:
                with held():  # a stop while it starts waits until the harness is known, to be told
                    harness = _Harness(proc=self.start(), started=started)
                threading.Thread(target=_reader, args=(harness.proc, harness.lines), daemon=True).start()
                outcome = self._follow(harness)
            except KeyboardInterrupt as exc:
                if harness is not None:
                    self._stop(harness)
                return Outcome("interrupted", signum=getattr(exc, "signum", None))
            if outcome is not None:
                return outcome

    def _stop(self, harness: _Harness) -> None:
        """Ask the harness to stop (it writes its record), and kill it if it does not in time."""
        self.progress.note("interrupted: stopping the harness, keeping every finished kernel ...")
        harness.proc.interrupt()
        try:
            harness.proc.wait(GRACE_S)
        except Exception:  # noqa: BLE001 - it did not stop in time: kill it
            harness.proc.kill()

    def _follow(self, h: _Harness) -> Outcome | None:
        """Read one start's events to its end: the run's outcome, or None to start the harness again."""
        while True:
            wait = POLL_S if h.deadline is None else max(0.0, min(POLL_S, h.deadline - time.monotonic()))
            try:
                line = h.lines.get(timeout=wait)
            except queue.Empty:
                if h.restart and h.past_deadline():
                    h.stop()  # ranks cut off from the engine would keep it waiting for ever
                    return None
                if h.past_deadline():
                    self._timed_out(h)
                    return None
                continue
            if line is None:
                if h.restart:  # whatever the engine's status: stop every rank, start afresh
                    h.stop()
                    return None
                return self._ended(h)
            self._event(h, line)

    def _timed_out(self, h: _Harness) -> None:
        h.stop()
        timeout = self.plan.settings.kernel_timeout_s
        reason = f"still running after the per-kernel timeout of {timeout:g} s (--kernel-timeout)"
        _record(self.plan, self.outdir, h.current, Status.TIMEOUT, _with_casualty(h.proc, reason))
        self.progress.finished({"id": h.current, "status": "timeout"})

    def _ended(self, h: _Harness) -> Outcome | None:
        """The harness's stdout closed: its exit status says how the run goes on."""
        code = h.proc.wait(GRACE_S)
        ranks = rank_failures(self.outdir, since=h.started)
        if code == ExitCode.OK:
            return Outcome("complete")
        if code == ExitCode.WRITE_FAILED:
            return Outcome("failed", _write_failure(h.error, self.outdir), exit_code=ExitCode.WRITE_FAILED)
        if code == ExitCode.LOCKED:
            message = h.error.get("message", "another harness writes to this folder")
            return Outcome("failed", message, exit_code=ExitCode.USAGE)
        if code == ExitCode.INTERRUPTED and not ranks:
            return Outcome("interrupted")
        if h.current is None and h.finished_here and code != ExitCode.BACKEND_UNAVAILABLE:
            return None  # stopped between kernels (an engine tearing its ranks down): start again
        if h.current is None and self.plan.settings.ranks > 1 and self.setup_failures < SETUP_RETRIES:
            self.setup_failures += 1  # ranks that could not meet (a busy machine): once more
            self.progress.note(f"starting the ranks again: {_rank_reason(ranks, h.error, h.proc, code)}"[:400])
            return None
        if code == ExitCode.BACKEND_UNAVAILABLE or h.current is None:
            return Outcome("failed", _with_casualty(h.proc, _rank_reason(ranks, h.error, h.proc, code)))
        reason = _with_casualty(h.proc, _death_reason(code, h.proc.stderr_tail(), ranks))
        _record(self.plan, self.outdir, h.current, Status.FAILED, reason)
        self.progress.finished({"id": h.current, "status": "failed", "reason": reason})
        return None

    def _event(self, h: _Harness, line: str) -> None:
        event = parse_event(line)
        if event is None:
            return
        kind = event["event"]
        if kind is Event.START:
            h.current, h.deadline = event["id"], time.monotonic() + self.plan.settings.kernel_timeout_s
            self.progress.started(event)
        elif kind is Event.DONE:
            h.current, h.deadline = None, None
            h.finished_here += 1
            self.progress.finished(event)
        elif kind is Event.ERROR:
            h.error = event
        elif kind is Event.RESTART:
            h.restart, h.deadline = True, time.monotonic() + GRACE_S  # for every rank to end
            self.progress.note(f"restarting the harness: {event.get('reason', '')}"[:300])


def _write_failure(error: dict, outdir: Path) -> str:
    return str(write_failure(outdir, error.get("message") or "a result could not be written"))


def _rank_reason(ranks: list[dict], error: dict, proc: HarnessProcess, code: int) -> str:
    """Why the harness (or its ranks) stopped before a kernel: the first rank that recorded a
    failure, with its log, and rank 0's own message; else the end of the harness's stderr."""
    said = [_first_rank(ranks)] if ranks else []
    if error.get("message"):
        said.append(f"rank 0: {error['message']}" if ranks else str(error["message"]))
    return (
        "; ".join(said) or _tail(proc.stderr_tail()) or f"the harness stopped with status {code} before it ran a kernel"
    )


def _first_rank(ranks: list[dict]) -> str:
    first = ranks[0]
    return f"rank {first['rank']} failed first: {first['message'][:500]} (its log: {first['log']})"


def _record(plan: Plan, outdir: Path, item_id: str | None, status: Status, reason: str) -> None:
    item = next(i for i in plan.items if i.id == item_id)
    append_result(outdir / RESULTS_FILE, host_result(item, status, reason, plan.backend))


def _with_casualty(proc: HarnessProcess, reason: str) -> str:
    """The reason, after the rank an engine of several ranks reported ended first
    (runner/launch/ranks/ranked_harness.py)."""
    who = getattr(proc, "casualty", lambda: "")()
    return f"{who}; {reason}" if who else reason


def _death_reason(code: int, stderr: str, ranks: list[dict] | None = None) -> str:
    if code in (137, -9):
        what = "killed (SIGKILL: most often the out-of-memory killer)"
    elif code < 0:
        what = f"killed by signal {-code}"
    elif code > 128:
        what = f"killed by signal {code - 128}"
    else:
        what = f"exited with status {code}"
    if ranks:  # several ranks: the first that failed says why (its stderr is in its own log)
        return f"the harness crashed during this kernel: {_first_rank(ranks)}"
    tail = _tail(stderr, 3)
    return f"the harness crashed during this kernel: {what}" + (f": {tail}" if tail else "")


def _tail(text: str, lines: int = 1) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])
