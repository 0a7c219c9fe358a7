"""`deepbench-run`: benchmark a suite on a platform and collect validated results.

  deepbench-run --local --suite smoke                 # this machine's CPU, no container
  deepbench-run --platform nvidia --suite train       # in the NVIDIA image (built if missing)
  deepbench-run --resume deepbench-results/RUN_ID     # continue an interrupted run

Every kernel is warmed up, timed until its median is known to --target precision (or a time
cap), and its outputs are checked against a float64 reference; a kernel that fails its check
reports the failure, not a time. Results: OUT/results.jsonl (one record per kernel, written as
soon as it is measured), OUT/run.json (the run record), OUT/plan.json (what was asked).

Exit status: 0 all kernels ok or unsupported; 1 some failed or timed out; 2 usage error (also:
another run is writing the folder, or --resume cannot trust it); 74 a result or the run record
could not be written (disk full: the message says how much is needed); 128 + the signal when
stopped by Ctrl-C (130), SIGTERM (143) or SIGHUP (129): resume with --resume OUT."""

from __future__ import annotations

import shlex
from typing import Any

from rich.console import Console

from deepbench.kernels.harness.protocol import ExitCode
from deepbench.kernels.harness.record import build_record, read_facts, read_record, write_record
from deepbench.kernels.results import RESULTS_FILE, RUN_FILE, RunRecord
from deepbench.kernels.results_file import WriteFailed, read_results
from deepbench.kernels.results_file import exists as results_file_exists

from ...analysis.sanity import context_of
from ...analysis.sources import load_run
from ...analysis.summary import groups, summary_line
from ...errors import UserError
from ...platforms import Platform, get_platform
from ...render.display import RunProgress, make_console, print_entry, print_noise, print_tables
from ...render.tables import tables
from ..images.container import ChosenImage, choose_image, container_starter, start_in
from ..images.devices import check_host
from ..images.docker_client import connect
from ..ranks.engines import with_ranks
from ..ranks.rank_plan import needs_engine
from ..ranks.ranked_harness import RankedHarness
from . import run_folder
from .local import LocalHarness
from .new_plan import plan_for
from .provenance import with_host_facts
from .request import RunRequest
from .run_folder import Resume, RunFolder
from .signals import exit_status, stop_on_signals
from .supervise import Outcome, Starter, supervise

DESCRIPTION = __doc__


def run(request: RunRequest) -> int:
    console = make_console()
    with stop_on_signals():
        try:
            folder, chosen = _open_folder(request)
        except KeyboardInterrupt as exc:
            console.print(f"[yellow]{_not_begun(request)}[/]", highlight=False)
            return exit_status(exc)
        return _run(folder, chosen, request, console)


def _not_begun(request: RunRequest) -> str:
    """What a stop before the run began leaves: nothing for a new run (create undoes its folder), the
    folder as it was for a resume."""
    if isinstance(request.mode, Resume):
        folder = shlex.quote(str(request.mode.folder))
        return f"interrupted before the run resumed: nothing was measured; continue: deepbench-run --resume {folder}"
    return "interrupted before the run started: nothing was measured, and no results folder was left"


def _open_folder(request: RunRequest) -> tuple[RunFolder, ChosenImage | None]:
    """The run's folder, and for a new container run its image: the host's devices, Docker and the image
    (found, built or pulled, and checked) come before the folder, so that a run that cannot start
    leaves none."""
    if isinstance(request.mode, Resume):
        if not request.local:  # --local on a container run: the conflict is said by reopen
            _reach_docker_first(request.mode)
        return run_folder.reopen(request.mode, request), None
    platform = request.run_platform
    if not request.local:
        check_host(platform, log=make_console().print)  # its devices, before a plan, a build or a pull
    plan, outdir = plan_for(request)
    chosen = None if request.local else choose_image(platform, request.container, log=_say)
    return run_folder.create(outdir, plan, request.local), chosen


def _reach_docker_first(resume: Resume) -> None:
    """A container run resumed: its devices and Docker, before its folder is reopened and written."""
    prior = read_record(resume.folder) if (resume.folder / RUN_FILE).is_file() else None
    if prior is None or prior.provenance.local is not False or resume.launch:
        return
    check_host(get_platform(prior.platform), log=make_console().print)
    connect()


def _say(line: str) -> None:
    make_console().print(line, highlight=False, markup=False)


def _launch_of(request: RunRequest) -> str | None:
    """--launch: the cluster engine's command that starts the ranks of a resumed run."""
    return request.mode.launch if isinstance(request.mode, Resume) else None


def _run(folder: RunFolder, chosen: ChosenImage | None, request: RunRequest, console: Console) -> int:
    outdir = folder.path
    for note in folder.notes:
        console.print(f"[yellow]repaired: {note}[/]", highlight=False)
    outcome, start = _measure(folder, chosen, request, console)
    record, late = _close(folder, outcome, start)
    if outcome.state == "failed":
        raise UserError(outcome.message or "the harness could not start", exit_code=outcome.exit_code)
    try:
        _show(folder, record, console)
    except KeyboardInterrupt as exc:  # the first stop came as the tables were drawn: the run was not stopped
        late = late or exc
    if record.state == "interrupted":
        launch = _launch_of(request)
        console.print(
            f"[yellow]interrupted: {sum(record.counts.values())} of {record.planned} kernels done; "
            f"continue with: deepbench-run --resume {shlex.quote(str(outdir))}"
            + (f" --launch {shlex.quote(launch)}" if launch else "")
            + "[/]"
        )
        return exit_status(signum=outcome.signum)
    if late is not None:
        console.print(
            f"[yellow]stopped after the run ended: it is {record.state}, its record written; its tables: "
            f"deepbench report {shlex.quote(str(outdir))}[/]"
        )
        return exit_status(late)
    return ExitCode.KERNEL_FAILURES if record.counts.get("failed") or record.counts.get("timeout") else ExitCode.OK


def _measure(
    folder: RunFolder, chosen: ChosenImage | None, request: RunRequest, console: Console
) -> tuple[Outcome, Any]:
    """Start the harness and supervise it to the end of the plan (or the user's stop); how it ended,
    and the starter (a container's says which image ran)."""
    plan, outdir = folder.plan, folder.path
    platform = get_platform(plan.platform)
    start = None
    try:
        start = _starter(folder, chosen, platform, request)
        console.print(
            f"[bold]deepbench-run[/] {plan.suite} on {platform.name} "
            f"({_where(request, folder.local)}, backend {plan.backend}): "
            f"{len(plan.items)} kernels, {folder.done} already done -> {outdir}"
        )
        with RunProgress(console, total=len(plan.items), done=folder.done) as progress:
            if request.results.quiet:
                progress.finished = lambda event: progress.bar.advance(progress.task)  # type: ignore[method-assign]
            outcome = supervise(plan, outdir, start, progress)
    except KeyboardInterrupt as exc:  # stopped while the image was prepared, or between two harness starts
        outcome = Outcome("interrupted", signum=getattr(exc, "signum", None))
    except WriteFailed as exc:  # the host's own record of a failed kernel
        outcome = Outcome("failed", str(run_folder.write_failure(outdir, exc)), exit_code=ExitCode.WRITE_FAILED)
    except UserError as exc:  # Docker, the image ... (the run record says the run failed, then the message)
        outcome = Outcome("failed", str(exc), exit_code=exc.exit_code)
    return outcome, start


def _close(folder: RunFolder, outcome: Outcome, start: Any) -> tuple[RunRecord, KeyboardInterrupt | None]:
    """The final run record, written whatever comes: a first stop signal that lands while it is
    written (the run had ended) is kept to be said, and the record written again (a later signal is
    only noted: signals.py)."""
    try:
        return _final_record(folder, outcome, start), None
    except KeyboardInterrupt as exc:
        return _final_record(folder, outcome, start), exc


def _show(folder: RunFolder, record: RunRecord, console: Console) -> None:
    """The run's tables, its summary line, its warnings and how busy the machine was (none before
    its first result: a run stopped that early has nothing to show)."""
    outdir = folder.path
    if not results_file_exists(outdir / RESULTS_FILE):
        return
    results = read_results(outdir / RESULTS_FILE)
    source = load_run(outdir)
    ctx = context_of(source)
    print_tables(console, tables(results, ctx), how_to_see=f"deepbench report {shlex.quote(str(outdir))} --columns all")
    console.print(f"{summary_line(groups(list(source.entries), ctx), folder.plan.suite)}; results in {outdir}")
    for warning in record.device.get("warnings", []):  # e.g. emulation, a throttled board
        print_entry(console, "warning:", warning, style="yellow", text_style="yellow")
    print_noise(console, record.noise)


def _final_record(folder: RunFolder, outcome: Outcome, start: Any) -> RunRecord:
    """run.json at the end of this segment; a run record that cannot be written (a full disk) is
    said in one line, and the run keeps its earlier record (a resume closes the segment)."""
    facts = with_host_facts(read_facts(folder.path), folder.plan, folder.local)
    if getattr(start, "provenance", None):  # a container run: the image that ran, by digest
        facts.setdefault("provenance", {})["image"] = start.provenance
    record = build_record(folder.plan, folder.path, outcome.state, folder.started_at, facts)
    record = run_folder.finish(folder, record, record.state)
    try:
        write_record(folder.path, record)
    except WriteFailed as exc:
        if outcome.state == "failed":  # the harness's own message says more (what the rest needs)
            raise UserError(outcome.message, exit_code=outcome.exit_code) from None
        raise run_folder.write_failure(folder.path, exc) from None
    return record


def _where(request: RunRequest, local: bool) -> str:
    launch = _launch_of(request)
    if launch:
        return f"ranks started by {shlex.split(launch)[0]}"
    return "local" if local else "container"


def _starter(folder: RunFolder, chosen: ChosenImage | None, platform: Platform, request: RunRequest) -> Starter:
    plan, outdir, plan_path = folder.plan, folder.path, folder.plan_path
    env, launch = dict(request.env), _launch_of(request)
    threads = plan.settings.threads
    if launch:  # ranks across nodes, started by the cluster's engine (its command was checked with the request)
        return lambda: RankedHarness(plan.backend, plan.settings.ranks, plan_path, outdir, threads, env, launch=launch)
    if folder.local and needs_engine(plan):  # all-reduce over several ranks: torchrun or mpirun starts them
        return lambda: RankedHarness(plan.backend, plan.settings.ranks, plan_path, outdir, threads, env)
    if folder.local:
        return lambda: LocalHarness(plan_path, outdir, env)
    if chosen is not None:  # a new run: its image was found before its folder was made
        starter = start_in(chosen, plan_path, outdir, platform, request.container, env)
    else:  # a resume: the image the run started in
        asked = request.container
        starter = container_starter(plan_path, outdir, platform, asked, env=env, recorded=folder.image, log=_say)
    run_folder.record_image(folder, starter.provenance)
    if needs_engine(plan):  # all ranks of this node in the one container, under torchrun or mpiexec
        with_ranks(starter.options, plan)
    return starter
