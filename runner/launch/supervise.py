"""Drive the harness to the end of a plan, whatever happens to it.

The harness runs in another process (a subprocess with --local, a container otherwise) and
prints one JSON event per line. The supervisor shows progress, and when the harness dies in the
middle of a kernel (a crash, an out-of-memory kill) or a kernel outlasts the per-kernel timeout,
it records that kernel as `failed` or `timeout` on the host and starts the harness again, which
skips every kernel already in results.jsonl. Ctrl-C (and SIGTERM or SIGHUP, runner/launch/signals.py)
is passed on to the harness, which writes its run record before it exits, so nothing measured
is lost. A harness that cannot write a result (a full disk) stops the run with what it needs;
with several ranks, the first rank that failed is named with its reason and log, and ranks that
could not even meet (their communicator's setup failed) are started again, at most twice."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from deepbench.kernels.harness.protocol import Event, ExitCode, parse_event
from deepbench.kernels.harness.ranks import rank_failures
from deepbench.kernels.precision import PRECISIONS
from deepbench.kernels.results import RESULTS_FILE, KernelResult, Plan, PlanItem, RunState, Status, utcnow
from deepbench.kernels.results_file import append_result, scan

from .run_folder import write_failure

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
    timeout = plan.settings.kernel_timeout_s
    setup_failures = 0
    while True:
        done = {r.id for r in scan(outdir / RESULTS_FILE).results}
        if all(item.id in done for item in plan.items):
            return Outcome("complete")
        started = time.time()
        proc = start()
        q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_reader, args=(proc, q), daemon=True).start()
        current: str | None = None
        deadline: float | None = None
        error: dict = {}
        restart = False  # the harness asked to be started again (its ranks' communicator broke)
        finished_here = 0  # kernels this start finished: a death between kernels after progress restarts
        try:
            while True:
                wait = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
                try:
                    line = q.get(timeout=wait)
                except queue.Empty:
                    if restart and deadline is not None and time.monotonic() > deadline:
                        proc.kill()  # ranks cut off from the engine would keep it waiting for ever
                        proc.wait(GRACE_S)
                        break
                    if deadline is not None and time.monotonic() > deadline:
                        proc.kill()
                        proc.wait(GRACE_S)
                        _record(
                            plan,
                            outdir,
                            current,
                            Status.TIMEOUT,
                            _with_casualty(
                                proc, f"still running after the per-kernel timeout of {timeout:g} s (--kernel-timeout)"
                            ),
                        )
                        progress.finished({"id": current, "status": "timeout"})
                        break
                    continue
                if line is None:
                    if restart:  # whatever the engine's status: stop every rank, start afresh
                        proc.kill()
                        proc.wait(GRACE_S)
                        break
                    code = proc.wait(GRACE_S)
                    ranks = rank_failures(outdir, since=started)
                    if code == ExitCode.OK:
                        return Outcome("complete")
                    if code == ExitCode.WRITE_FAILED:
                        return Outcome("failed", _write_failure(error, outdir), exit_code=ExitCode.WRITE_FAILED)
                    if code == ExitCode.LOCKED:
                        return Outcome(
                            "failed",
                            error.get("message", "another harness writes to this folder"),
                            exit_code=ExitCode.USAGE,
                        )
                    if code == ExitCode.INTERRUPTED and not ranks:
                        return Outcome("interrupted")
                    if current is None and finished_here and code != ExitCode.BACKEND_UNAVAILABLE:
                        break  # stopped between kernels (an engine tearing its ranks down): start again
                    if current is None and plan.settings.ranks > 1 and setup_failures < SETUP_RETRIES:
                        setup_failures += 1  # ranks that could not meet (a busy machine): once more
                        progress.note(f"starting the ranks again: {_rank_reason(ranks, error, proc, code)}"[:400])
                        break
                    if code == ExitCode.BACKEND_UNAVAILABLE or current is None:
                        return Outcome("failed", _with_casualty(proc, _rank_reason(ranks, error, proc, code)))
                    reason = _with_casualty(proc, _death_reason(code, proc.stderr_tail(), ranks))
                    _record(plan, outdir, current, Status.FAILED, reason)
                    progress.finished({"id": current, "status": "failed", "reason": reason})
                    break
                event = parse_event(line)
                if event is None:
                    continue
                kind = event["event"]
                if kind is Event.START:
                    current, deadline = event["id"], time.monotonic() + timeout
                    progress.started(event)
                elif kind is Event.DONE:
                    current, deadline = None, None
                    finished_here += 1
                    progress.finished(event)
                elif kind is Event.ERROR:
                    error = event
                elif kind is Event.RESTART:
                    restart, deadline = True, time.monotonic() + GRACE_S  # for every rank to end
                    progress.note(f"restarting the harness: {event.get('reason', '')}"[:300])
        except KeyboardInterrupt as exc:
            progress.note("interrupted: stopping the harness, keeping every finished kernel ...")
            proc.interrupt()
            try:
                proc.wait(GRACE_S)
            except Exception:  # noqa: BLE001 - it did not stop in time: kill it
                proc.kill()
            return Outcome("interrupted", signum=getattr(exc, "signum", None))


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
    """The reason, after the rank an engine of several ranks reported ended first (runner/launch/ranks.py)."""
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
