"""The harness: `python -m deepbench.kernels.harness PLAN OUTDIR`.

Runs inside the platform's container (or in a subprocess with --local). Reads the plan, skips
items already in OUTDIR/results.jsonl (so a restarted or resumed run continues), appends one
result per kernel as soon as it is measured, prints one JSON event per line on stdout for the
host's progress display, and writes the run record at the end. SIGINT, SIGTERM or SIGHUP stops
after the record is written: every finished kernel is kept. The process that appends results
(rank 0) holds the folder's harness lock for its whole life: a second harness on the same
folder stops at once. A result that cannot be written (a full disk) leaves no partial line:
the harness says what happened and how much space the rest needs, and stops.

Exit status (ExitCode in protocol.py): 0 complete, 130 interrupted, 3 the backend cannot load on
this machine, 74 a result could not be written, 75 another harness is writing to the folder.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from ..backends import load_backend
from ..backends.collectives.terminal import TERMINAL_FD_ENV
from ..backends.contract.base import Backend
from ..backends.contract.declaration import BackendOptionsError
from ..faults import maybe_fail_backend, maybe_inject
from ..folder_lock import HARNESS_LOCK, FolderLock, Locked
from ..format_versions import read_model
from ..launch_rank import launch_rank
from ..lifeline import stop_with_parent
from ..noise import judge, snapshot, usable_cpus
from ..precision import Precision
from ..provenance import harness_provenance
from ..results import RESULTS_FILE, Plan, RunState, utcnow
from ..results_file import WriteFailed, append_result, scan
from ..system import collect_system
from .execute import failed_result, run_item
from .facts import host_facts
from .protocol import ErrorKind, Event, ExitCode, event_line
from .ranks import RANK_LOG, RANKS_DIR, rank_dir_name, record_failure
from .record import build_record, write_facts, write_record

# Every stop signal is handled here, SIGINT included: a harness started from a shell's background
# job (`deepbench-run ... &`, as Slurm and systemd scripts do) inherits SIGINT ignored, and the
# runner's Ctrl-C would otherwise never reach it (issue 42).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Ranks other than 0 (collectives started by torchrun/mpirun/srun) stay silent: the host reads
# rank 0's events only, and each of them writes its own records under OUTDIR/ranks/rank-K/.
_SILENT = False
_HOST_GONE = False


class HostGone(KeyboardInterrupt):
    """Our stdout's reader (the runner) is gone: stop as if interrupted, keeping what is done."""


def emit(event: Event, **fields: Any) -> None:
    global _HOST_GONE
    if _SILENT or _HOST_GONE:
        return
    try:
        print(event_line(event, **fields), flush=True)
    except (BrokenPipeError, ValueError):
        _HOST_GONE = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no "Exception ignored" when Python flushes at exit
        raise HostGone from None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _rank_folder(outdir: Path, rank: int) -> Path:
    """Where a rank other than 0 keeps its records; its stderr goes to a log there from now on."""
    folder = outdir / RANKS_DIR / rank_dir_name(rank)
    folder.mkdir(parents=True, exist_ok=True)
    log = os.open(folder / RANK_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.environ[TERMINAL_FD_ENV] = str(os.dup(sys.stderr.fileno()))  # a rank that stops still says why there
    os.dup2(log, sys.stderr.fileno())
    os.close(log)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deepbench.kernels.harness", description=__doc__)
    parser.add_argument("plan", type=Path)
    parser.add_argument("outdir", type=Path)
    args = parser.parse_args(argv)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    stop_with_parent()
    global _SILENT
    where = launch_rank()
    _SILENT = not where.is_main
    run_dir: Path = args.outdir
    rank_dir = None if where.is_main else _rank_folder(run_dir, where.rank)
    try:
        plan = read_model(Plan, args.plan.read_bytes())
        return _run(plan, run_dir, rank_dir)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Locked as exc:
        emit(
            Event.ERROR, kind=ErrorKind.LOCKED.value, message=f"{exc}: a second harness must not write the same results"
        )
        return ExitCode.LOCKED
    except WriteFailed as exc:
        if rank_dir is not None:
            record_failure(rank_dir, where.rank, str(exc))
        emit(Event.ERROR, kind=ErrorKind.WRITE.value, message=str(exc), needed_bytes=exc.needed, free_bytes=exc.free)
        return ExitCode.WRITE_FAILED
    except BaseException as exc:
        if rank_dir is not None:  # rank 0 speaks to the host itself; the others leave a note
            record_failure(rank_dir, where.rank, f"{type(exc).__name__}: {exc}")
        raise


def _run(plan: Plan, run_dir: Path, rank_dir: Path | None) -> int:
    global _SILENT
    noise_before = snapshot()  # before this process opens the GPU: any process on it is someone else's
    outdir = rank_dir or run_dir
    outdir.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(run_dir, HARNESS_LOCK, "the harness").acquire() if rank_dir is None else None
    started = utcnow()
    try:
        maybe_fail_backend(run_dir, launch_rank().rank)
        backend = load_backend(plan.backend, plan.settings)
    except (ImportError, RuntimeError, BackendOptionsError) as exc:
        message = f"backend '{plan.backend}' cannot run here: {exc}"
        if rank_dir is not None:
            record_failure(rank_dir, launch_rank().rank, message)
        emit(Event.ERROR, message=message)
        return ExitCode.BACKEND_UNAVAILABLE
    rank = backend.rank if backend.ranked else launch_rank().rank
    _SILENT = rank != 0
    # rank 0's results are the run's; the plan's progress is rank 0's for every rank
    if rank != 0 and rank_dir is None:  # a ranked backend knows better than the engine's variables
        outdir = _rank_folder(run_dir, rank)
    facts = _start_facts(plan, backend, outdir, started)
    state = _measure(plan, backend, run_dir, outdir, started, facts)
    backend.close()
    _end_facts(plan, backend, outdir, facts, noise_before)
    record = build_record(plan, outdir, state, started, facts)
    write_record(outdir, record)
    with contextlib.suppress(HostGone):
        emit(Event.END, state=record.state)
    if lock is not None:
        lock.release()
    return ExitCode.INTERRUPTED if state == "interrupted" else ExitCode.OK


def _start_facts(plan: Plan, backend: Backend, outdir: Path, started: datetime) -> dict[str, Any]:
    """What the run ran on and with, read where the kernels run (device, software, ceilings, system
    description, provenance), written before the first kernel."""
    facts = {"host": host_facts(), "device": backend.device_facts(), "software": backend.library_versions()}
    emit(Event.FACTS, device=facts["device"].get("name", ""))
    try:
        precisions = sorted({i.precision for i in plan.items}, key=list(Precision).index)
        facts["ceilings"] = backend.ceilings(precisions)  # a CPU measures a GEMM in each of them
    except Exception as exc:  # noqa: BLE001 - ceilings are optional; say why they are missing
        facts["ceilings"] = {}
        facts["device"]["ceilings_error"] = str(exc)
    facts["system"] = collect_system(libraries=facts["software"]).model_dump(mode="json")
    facts["provenance"] = harness_provenance(plan, started)
    write_facts(outdir, facts)
    return facts


def _measure(
    plan: Plan, backend: Backend, run_dir: Path, outdir: Path, started: datetime, facts: dict[str, Any]
) -> RunState:
    """Every kernel of the plan not yet in the run's results, each result appended as it is made; the
    state the run ends in (interrupted: a signal, or a rank lost)."""
    results_path = outdir / RESULTS_FILE
    done = {r.id for r in scan(run_dir / RESULTS_FILE).results}  # damaged lines: measured again
    todo = [item for item in plan.items if item.id not in done]
    state: RunState = "complete"
    try:
        for i, item in enumerate(todo):
            emit(Event.START, id=item.id, index=len(done) + i, total=len(plan.items))
            # Several ranks begin each kernel together, after rank 0 told the host which one it is:
            # whatever befalls one rank from here is that kernel's, a rank gone at this barrier too
            # (rank 0's reason then names the ranks that did not answer).
            lost = ""  # why the ranks could not begin this kernel together
            try:
                backend.item_barrier()
            except Exception as exc:  # noqa: BLE001 - recorded as the kernel's failure, then the ranks restart
                result = failed_result(backend, item, exc)
                lost = result.reason
            else:
                maybe_inject(item.id)
                result = run_item(backend, item, plan.settings)
            try:
                append_result(results_path, result)
            except WriteFailed as exc:
                exc.args = (f"{exc.args[0]}; {_space_for_the_rest(results_path, len(todo) - i, exc.needed)}",)
                _write_record_if_possible(plan, outdir, "interrupted", started, facts)
                raise
            emit(
                Event.DONE,
                id=item.id,
                status=result.status.value,
                median_us=result.time_us.median if result.time_us else None,
                reason=result.reason[:200],
            )
            if backend.broken or lost:  # a rank is gone: this process group cannot go on
                emit(Event.RESTART, reason=backend.broken or lost)
                state = "interrupted"
                break
    except KeyboardInterrupt:
        state = "interrupted"
    return state


def _end_facts(plan: Plan, backend: Backend, outdir: Path, facts: dict[str, Any], noise_before: Any) -> None:
    """How busy the machine was meanwhile, and what the run's end changed on the device."""
    s = plan.settings
    facts["noise"] = judge(
        noise_before,
        snapshot(),
        usable_cpus(),
        s.threads,
        gpu_run=s.device != "cpu",
        shared_cpus=s.ranks > 1 and s.device == "cpu",
    ).model_dump(mode="json")
    try:
        facts["device"].update(backend.device_facts_after())
        write_facts(outdir, facts)
    except Exception as exc:  # noqa: BLE001 - end-of-run facts are optional; say why they are missing
        facts["device"]["after_error"] = str(exc)


def _space_for_the_rest(path: Path, left: int, needed: int) -> str:
    """How much the kernels still to measure need, from the records written so far."""
    try:
        size, count = path.stat().st_size, len(scan(path).records)
    except OSError:
        size, count = 0, 0
    per = max(needed, size // count if count else needed)
    return f"the {left} kernel(s) left need about {per * left:,} bytes"


def _write_record_if_possible(plan: Plan, outdir: Path, state: RunState, started: Any, facts: dict) -> None:
    try:
        write_record(outdir, build_record(plan, outdir, state, started, facts))
    except WriteFailed:
        pass  # the runner's record of the run stays as it was


if __name__ == "__main__":
    sys.exit(main())
