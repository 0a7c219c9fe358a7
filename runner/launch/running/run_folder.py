"""A run's folder, made for a new run or reopened by --resume, with one writer at a time; and the
results options that name it (--out, --resume, --retry, --quiet) with the run's mode they make (a new
run, or a resume with what it measures again and how its ranks start).

A new run takes the folder's lock, writes plan.json and a first run.json (state `running`, how
the run is launched: local or container, the plan's SHA-256, its first segment), all atomically.
--resume takes the lock, then trusts nothing it has not checked:

- plan.json must be the plan the run started with (its SHA-256 against run.json's);
- options given with --resume must not contradict the run (another suite, --fast, --local on a
  container run ...): the plan and how it runs are fixed when it starts (resume_checks.py);
- results.jsonl must hold one result per kernel, all of the plan: duplicates (two writers) or
  results of kernels the plan lacks stop the resume with exit 2 and what to do;
- a partial last line (a kill or a full disk mid-write) and damaged lines elsewhere are set aside
  in results.rejected.jsonl, with their line numbers, and their kernels measured again.

Each start and resume is a segment of the run (start, end, how it ended) in run.json; a segment
left open by a killed runner is closed at its last result when the run resumes, so every result
lies inside a segment (what `deepbench check` requires). Older folders, which said how they were
launched in a hidden `.local` file, are still read.

A new run's folder is new, empty, or one that holds only a run's own files (`check_place`): never the
root, a system folder, the home folder or one above it, nor a folder of other things, so that a run's
files are never mixed in among someone else's. What `create` made before it failed or was stopped (a
signal, a full disk) it removes again: a run that did not start leaves no folder behind.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shlex
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepbench.kernels.folder_lock import HARNESS_LOCK, RUN_LOCK, FolderLock, Locked, describe, probe
from deepbench.kernels.format_versions import FormatVersionError, read_model
from deepbench.kernels.harness.protocol import ExitCode
from deepbench.kernels.harness.ranks import RANKS_DIR
from deepbench.kernels.harness.record import FACTS_FILE, build_record, read_record, write_record
from deepbench.kernels.provenance import items_sha256, kernel_identity
from deepbench.kernels.results import PLAN_FILE, RESULTS_FILE, RUN_FILE, Plan, RunRecord, Segment, Status, utcnow
from deepbench.kernels.results_file import (
    COMPRESSED_SUFFIX,
    REJECTED_FILE,
    Rejected,
    WriteFailed,
    only_compressed,
    rewrite,
    scan,
    set_aside,
    write_atomic,
)
from deepbench.kernels.results_file import exists as results_file_exists

from ...errors import UserError
from ...outpaths import refuse_foreign, refuse_guarded, writable_folder
from ..images.container import CONTAINER_FILE
from ..ranks.engines import launched_argv
from .local import LOG_FILE
from .provenance import command_line, host_provenance
from .resume_checks import LEGACY_LOCAL_MARKER, conflicts, launch_mode

if TYPE_CHECKING:
    from .request import RunRequest

HARNESS_WAIT_S = 20.0  # a harness left by a killed runner finishes its record within this
DEFAULT_RESULTS = Path("deepbench-results")
RETRY_STATUSES = (Status.FAILED.value, Status.TIMEOUT.value)
# What a run's folder holds, by name: its documents, locks and logs, its other ranks' folder, the
# image it ran in, older folders' marker; and (ATOMIC_TEMP) what write_atomic renames into place.
OWN_NAMES = frozenset(
    {
        PLAN_FILE,
        RUN_FILE,
        RESULTS_FILE,
        RESULTS_FILE + COMPRESSED_SUFFIX,
        REJECTED_FILE,
        RUN_LOCK,
        HARNESS_LOCK,
        LOG_FILE,
        FACTS_FILE,
        RANKS_DIR,
        CONTAINER_FILE,
        LEGACY_LOCAL_MARKER,
    }
)
ATOMIC_TEMP = re.compile(r"\.(?P<name>.+)\.\d+\.tmp")


def retry_statuses(text: str) -> tuple[str, ...]:
    """--retry's value: statuses whose kernels a resume measures again."""
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    wrong = [x for x in names if x not in RETRY_STATUSES]
    if not names or wrong:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(RETRY_STATUSES)} (comma-separated), not {text!r}")
    return names


def add_results_arguments(parser: argparse.ArgumentParser) -> None:
    out = parser.add_argument_group("results")
    out.add_argument("--out", type=Path, metavar="DIR", help="results folder (default: ./deepbench-results/RUN_ID)")
    out.add_argument("--resume", type=Path, metavar="DIR", help="continue the run in DIR where it stopped")
    out.add_argument(
        "--retry",
        type=retry_statuses,
        metavar="STATUSES",
        help="with --resume: measure again the kernels whose result is one of these (comma-separated: "
        f"{', '.join(RETRY_STATUSES)}); their old results are kept in {REJECTED_FILE}",
    )
    out.add_argument("--quiet", action="store_true", help="no per-kernel lines, only the tables")


@dataclass(frozen=True)
class ResultsOptions:
    """Where a new run's results go (None: DEFAULT_RESULTS/RUN_ID) and how much is shown meanwhile;
    --out is checked to be a place for a run when it is read (check_place)."""

    out: Path | None
    quiet: bool

    def __post_init__(self) -> None:
        if self.out is not None:
            check_place(self.out)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ResultsOptions:
        return cls(out=args.out, quiet=args.quiet)


@dataclass(frozen=True)
class NewRun:
    """A run planned from the command line, in a new folder."""


@dataclass(frozen=True)
class Resume:
    """--resume FOLDER: the run in FOLDER continued where it stopped, measuring again the results of
    the `retry` statuses (--retry), its ranks started by the cluster engine's command `launch`
    (--launch, checked to run the harness on this folder's plan)."""

    folder: Path
    retry: tuple[str, ...] = ()
    launch: str | None = None

    def __post_init__(self) -> None:
        if self.launch:
            launched_argv(self.launch, self.folder / PLAN_FILE, self.folder)  # a wrong command: said now


RunMode = NewRun | Resume


def mode_from(args: argparse.Namespace) -> RunMode:
    """The run's mode: --launch and --retry continue a run, so they come with --resume."""
    if args.resume is None:
        if args.launch:
            raise UserError(
                "--launch starts the plan that deepbench launch-command wrote: name its folder with --resume"
            )
        if args.retry:
            raise UserError(
                "--retry measures again the failed or timed-out kernels of a run: name its folder with --resume"
            )
        return NewRun()
    return Resume(args.resume, tuple(args.retry or ()), args.launch)


@dataclass
class RunFolder:
    path: Path
    plan: Plan
    local: bool
    lock: FolderLock
    image: dict | None = None  # the container image the run started in (a resumed container run)
    notes: list[str] = field(default_factory=list)  # what a resume repaired, to tell the user
    done: int = 0  # results already in the folder
    started_at: datetime = field(default_factory=utcnow)  # this segment's start

    @property
    def plan_path(self) -> Path:
        return self.path / PLAN_FILE


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lock(outdir: Path, role: str) -> FolderLock:
    try:
        return FolderLock(outdir, RUN_LOCK, role).acquire()
    except Locked as exc:
        raise UserError(
            f"{outdir} is in use by {describe(exc.holder)}: one run writes a results folder at a "
            f"time; wait for it to end (or stop it: kill {exc.holder.get('pid', 'PID')}), or "
            "choose another --out"
        ) from None
    except OSError as exc:
        raise UserError(f"{outdir}: cannot lock the folder ({exc.strerror})") from None


def write_failure(outdir: Path, what: Any) -> UserError:
    """A write that failed in the results folder, as one line: what (a full disk: the space needed),
    that nothing is lost, and how to go on; exit status 74."""
    return UserError(
        f"results folder {outdir}: {what}; nothing measured is lost: make room, then continue with "
        f"deepbench-run --resume {shlex.quote(str(outdir))}",
        exit_code=ExitCode.WRITE_FAILED,
    )


def _writing(fn: Any, path: Path, *args: Any) -> Any:
    """Write one of the run's own files; a write error is one line (write_failure)."""
    try:
        return fn(path, *args)
    except WriteFailed as exc:
        raise write_failure(path if path.is_dir() else path.parent, exc) from None


# ----- a new run ------------------------------------------------------------------------------
def is_own(name: str, also: frozenset[str] = frozenset()) -> bool:
    """Whether a folder's entry `name` is one a run (and, `also`, the command that makes it) writes."""
    temp = ATOMIC_TEMP.fullmatch(name)
    own = OWN_NAMES | also
    return name in own or (temp is not None and temp["name"] in own)


def check_place(outdir: Path, also: frozenset[str] = frozenset(), option: str = "--out") -> None:
    """Where a new run's folder may go, checked before anything is made: not a guarded place (the root,
    a system folder, the home folder or one above it), and new, empty or holding only a run's own files
    (`also`: those of the command that makes it, e.g. verify's report). A folder that holds a run is
    left to `create`, which says how to continue it."""
    refuse_guarded(outdir, option)
    if any(results_file_exists(outdir / name) for name in (RESULTS_FILE, PLAN_FILE)):
        return
    refuse_foreign(outdir, lambda name: is_own(name, also), option)


def _missing(path: Path) -> list[Path]:
    """The folders from `path` up that do not exist yet (deepest first): what making it makes."""
    out = []
    while not path.exists() and not path.is_symlink() and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def _undo(outdir: Path, before: set[str], made: list[Path], lock: FolderLock | None) -> None:
    """Remove what `create` wrote (the files that were not there `before`, the lock last) and the
    folders it made, when it failed or was stopped before the run began. Without the lock nothing is
    removed but the folders left empty: what is there may be another run's."""
    if lock is not None:
        for name in (PLAN_FILE, RUN_FILE, RUN_LOCK):
            if name not in before:
                with contextlib.suppress(OSError):
                    (outdir / name).unlink()  # the lock's file while still held: no one takes it meanwhile
        lock.release()
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty: nothing but ours was there


def create(
    outdir: Path,
    plan: Plan,
    local: bool,
    role: str = "deepbench-run",
    resume_hint: bool = True,
    also: frozenset[str] = frozenset(),
) -> RunFolder:
    """A new run's folder, locked, with its plan and first record; nothing stays when this fails or
    is stopped (a signal, a full disk, a folder another run holds)."""
    check_place(outdir, also)
    made = _missing(outdir)
    before: set[str] = set()
    lock = None
    try:
        writable_folder(outdir)
        before = set(os.listdir(outdir))
        lock = _lock(outdir, role)
        return _begin(outdir, plan, local, lock, resume_hint)
    except BaseException:
        _undo(outdir, before, made, lock)
        raise


def _begin(outdir: Path, plan: Plan, local: bool, lock: FolderLock, resume_hint: bool) -> RunFolder:
    """The plan and the first run record, written into the locked folder."""
    for name in (RESULTS_FILE, PLAN_FILE):
        if results_file_exists(outdir / name):
            hint = f"continue it with --resume {shlex.quote(str(outdir))}, or " if resume_hint else ""
            raise UserError(f"{outdir} already holds a run ({name}): {hint}choose another --out")
    folder = RunFolder(outdir, plan, local, lock)
    _writing(write_atomic, folder.plan_path, plan.model_dump_json(indent=1) + "\n")
    record = build_record(plan, outdir, "running", folder.started_at, {"provenance": host_provenance(local)})
    record = record.model_copy(
        update={
            "plan_sha256": sha256_of(folder.plan_path),
            "segments": (Segment(started_at=folder.started_at, command=command_line()),),
        }
    )
    _writing(write_record, outdir, record)
    return folder


def record_image(folder: RunFolder, image: dict) -> None:
    """A container run's image, in run.json as soon as it is known (a resume continues in it)."""
    record = read_record(folder.path)
    if record is None:
        return
    prov = record.provenance.model_copy(update={"image": image})
    _writing(write_record, folder.path, record.model_copy(update={"provenance": prov}))


def finish(folder: RunFolder, record: RunRecord, state: str) -> RunRecord:
    """The final record of this segment: the segment closed with how it ended."""
    segments = list(record.segments) or [Segment(started_at=folder.started_at)]
    segments[-1] = segments[-1].model_copy(update={"ended_at": record.ended_at, "state": state})
    return record.model_copy(update={"segments": tuple(segments), "started_at": segments[0].started_at})


# ----- --resume -------------------------------------------------------------------------------
def reopen(resume: Resume, request: RunRequest) -> RunFolder:
    """The folder of the run to continue, checked and repaired, with a new segment open; the request
    must ask nothing the run did not (resume_checks.py)."""
    outdir = resume.folder
    if not (outdir / PLAN_FILE).exists():
        raise UserError(f"nothing to resume in {outdir}: it has no {PLAN_FILE} (was it made by deepbench-run?)")
    if only_compressed(outdir / RESULTS_FILE):
        raise UserError(
            f"{outdir} holds a finished run stored compressed ({RESULTS_FILE}{COMPRESSED_SUFFIX}): "
            f"nothing to resume (gunzip it first to add to it)"
        )
    writable_folder(outdir, "--resume")
    lock = _lock(outdir, "deepbench-run --resume")
    _wait_for_harness(outdir)  # nothing is read, let alone repaired, while a harness may still write
    try:
        plan = read_model(Plan, (outdir / PLAN_FILE).read_bytes(), str(outdir / PLAN_FILE))
    except FormatVersionError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:
        raise UserError(f"{outdir / PLAN_FILE} is not a valid plan: {str(exc).splitlines()[0]}") from None
    prior = read_record(outdir)
    _check_plan(outdir, plan, prior)
    local = launch_mode(outdir, prior, request, resume.launch)
    problems = conflicts(request, plan, local, outdir)
    if problems:
        raise UserError(
            f"--resume continues the run as it was planned and launched, but {'; '.join(problems)}: "
            "resume without them, or start a new run (another --out) to change them"
        )
    folder = RunFolder(outdir, plan, local, lock)
    image = prior.provenance.image if prior is not None else None
    folder.image = image if isinstance(image, dict) and {"id", "tag"} <= set(image) else None
    folder.notes, folder.done = _verify_and_repair(outdir, plan)
    retry = set(resume.retry)
    if retry:
        again = _writing(set_aside_for_retry, outdir / RESULTS_FILE, retry)
        folder.done -= again
        if again:
            folder.notes.append(
                f"--retry {','.join(sorted(retry))}: {again} result(s) set aside in {REJECTED_FILE}; "
                "their kernels are measured again"
            )
    _writing(write_record, outdir, _new_segment(plan, outdir, prior, local, folder.started_at))
    return folder


def _check_plan(outdir: Path, plan: Plan, prior: RunRecord | None) -> None:
    if prior is None:
        return
    fix = "restore the plan the run started with, or start a new run (another --out) for this plan"
    if prior.plan_sha256 and prior.plan_sha256 != sha256_of(outdir / PLAN_FILE):
        raise UserError(
            f"{outdir / PLAN_FILE} has changed since the run started (its SHA-256 differs from the one "
            f"in run.json): {fix}"
        )
    recorded = prior.provenance.suite_sha256
    if recorded and recorded != items_sha256(plan.items):
        raise UserError(
            f"{outdir / PLAN_FILE} lists other kernels than the run recorded (provenance.suite_sha256): {fix}"
        )
    for attr in ("run_id", "suite", "platform", "backend"):
        if getattr(prior, attr) != getattr(plan, attr):
            raise UserError(
                f"{outdir / PLAN_FILE} says {attr} {getattr(plan, attr)!r} but the run recorded "
                f"{getattr(prior, attr)!r}: {fix}"
            )


def _verify_and_repair(outdir: Path, plan: Plan) -> tuple[list[str], int]:
    path = outdir / RESULTS_FILE
    found = scan(path)
    planned = {item.id for item in plan.items}
    lines: dict[str, list[int]] = defaultdict(list)
    for n, r, _ in found.records:
        lines[r.id].append(n)
    twice = {i: ns for i, ns in lines.items() if len(ns) > 1}
    if twice:
        i, ns = next(iter(twice.items()))
        more = f" (and {len(twice) - 1} more kernels)" if len(twice) > 1 else ""
        raise UserError(
            f"{path} holds {len(ns)} results for {i} (lines {', '.join(map(str, ns))}){more}: two runs "
            "wrote to this folder; keep the line you trust, delete the others, and resume again"
        )
    stray = {i: ns for i, ns in lines.items() if i not in planned}
    if stray:
        i, ns = next(iter(stray.items()))
        more = f" (and {len(stray) - 1} more)" if len(stray) > 1 else ""
        raise UserError(
            f"{path} line {ns[0]} holds a result for {i}, which plan.json does not list{more}: the plan "
            "was changed or the results come from another run; restore the plan, or start a new run "
            "(another --out)"
        )
    items = {item.id: item for item in plan.items}
    for n, r, _ in found.records:
        item = items[r.id]
        if kernel_identity(r.kernel) != kernel_identity(item.kernel) or r.precision.name.value != item.precision.value:
            raise UserError(
                f"{path} line {n} holds a result for {r.id} whose kernel or precision differs from "
                "plan.json's: the results come from another run or were edited; restore them, or start a "
                "new run (another --out)"
            )
    notes = []
    if found.fragment is not None:
        kid = _kernel_id(found.fragment.raw)
        notes.append(
            f"{RESULTS_FILE} ended in a partial record ({len(found.fragment.raw):,} bytes"
            f"{', of ' + kid if kid else ''}, from a write cut short): set aside in {REJECTED_FILE}; "
            "its kernel is measured again"
        )
    for bad in found.damaged:
        if bad.line in found.salvaged:
            notes.append(
                f"{RESULTS_FILE} line {bad.line} began with a partial record before a complete one: "
                f"the partial one set aside in {REJECTED_FILE}, the complete one kept"
            )
        else:
            notes.append(
                f"{RESULTS_FILE} line {bad.line} is damaged ({bad.reason[:160]}): set aside in "
                f"{REJECTED_FILE}; its kernel is measured again"
            )
    if not found.clean:
        _writing(rewrite, path, found)
    return notes, len(found.records)


def set_aside_for_retry(path: Path, statuses: set[str]) -> int:
    """--resume --retry failed,timeout: the results with those statuses leave results.jsonl for
    the side file (kept, never deleted), so that the harness measures their kernels again."""
    found = scan(path)
    keep = [(n, r, raw) for n, r, raw in found.records if r.status.value not in statuses]
    again = [
        Rejected(n, f"--retry: a {r.status.value} result, measured again", raw)
        for n, r, raw in found.records
        if r.status.value in statuses
    ]
    if again:
        set_aside(path, again)
        write_atomic(path, b"".join(raw.strip() + b"\n" for _, _, raw in keep))
    return len(again)


def _kernel_id(raw: bytes) -> str:
    m = re.search(rb'"id":\s*"([^"]{1,200})"', raw)
    return m.group(1).decode("utf-8", "replace") if m else ""


def _wait_for_harness(outdir: Path) -> None:
    """A harness left behind by a killed deepbench-run finishes its record and stops (it is told
    when its runner dies); one still writing after a while is named, never raced."""
    deadline = time.monotonic() + HARNESS_WAIT_S
    while True:
        holder = probe(outdir, HARNESS_LOCK)
        if holder is None:
            return
        if time.monotonic() > deadline:
            raise UserError(
                f"{outdir} is still being written by {describe(holder)}, left running by an earlier "
                f"deepbench-run: wait for it to end or stop it (kill {holder.get('pid', 'PID')}; in a "
                "container: docker ps --filter label=org.deepbench.role=harness), then resume"
            )
        time.sleep(0.5)


def _new_segment(plan: Plan, outdir: Path, prior: RunRecord | None, local: bool, now: datetime) -> RunRecord:
    """run.json for the resumed run: earlier segments closed (one a killed runner left open ends at
    its last result), a new one open, state `running`."""
    results = scan(outdir / RESULTS_FILE).results
    segments = list(prior.segments) if prior else []
    if prior is not None and not segments:  # made before segments were recorded
        segments = [
            Segment(
                started_at=prior.started_at,
                ended_at=prior.ended_at,
                state="killed" if prior.state == "running" else prior.state,
            )
        ]
    elif prior is None and results:  # killed before it wrote any record
        segments = [Segment(started_at=min(r.started_at for r in results), state="running")]
    if segments and segments[-1].ended_at is None:
        last = segments[-1]
        ends = [r.ended_at for r in results if r.ended_at >= last.started_at]
        if prior is not None and prior.ended_at >= last.started_at and prior.state != "running":
            ends.append(prior.ended_at)
        segments[-1] = last.model_copy(
            update={
                "ended_at": max(ends, default=last.started_at),
                "state": prior.state if prior and prior.state != "running" else "killed",
            }
        )
    segments.append(Segment(started_at=now, command=command_line()))
    facts: dict[str, Any] = {"provenance": host_provenance(local)}
    if prior is None:
        facts["provenance"]["local"] = local
    record = build_record(plan, outdir, "running", segments[0].started_at, facts)
    return record.model_copy(
        update={
            "segments": tuple(segments),
            "started_at": segments[0].started_at,
            "plan_sha256": (prior.plan_sha256 if prior and prior.plan_sha256 else sha256_of(outdir / PLAN_FILE)),
        }
    )
