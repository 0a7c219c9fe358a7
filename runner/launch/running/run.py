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
from deepbench.kernels.harness.record import build_record, read_facts, write_record
from deepbench.kernels.results import RESULTS_FILE, RunRecord
from deepbench.kernels.results_file import WriteFailed, read_results

from ...analysis.sanity import context_of
from ...analysis.sources import load_run
from ...analysis.summary import groups, summary_line
from ...errors import UserError
from ...platforms import Platform, get_platform
from ...render.display import RunProgress, make_console, print_entry, print_noise, print_tables
from ...render.tables import tables
from ..images.container import container_starter
from ..images.devices import check_host
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
            folder = _open_folder(request)
        except KeyboardInterrupt as exc:
            console.print("[yellow]interrupted before the run started: nothing was measured[/]")
            return exit_status(exc)
        return _run(folder, request, console)


def _open_folder(request: RunRequest) -> RunFolder:
    if isinstance(request.mode, Resume):
        return run_folder.reopen(request.mode, request)
    platform = request.run_platform
    if not request.local:
        check_host(platform, log=make_console().print)  # its devices, before a plan, a build or a pull
    plan, outdir = plan_for(request)
    return run_folder.create(outdir, plan, request.local)


def _launch_of(request: RunRequest) -> str | None:
    """--launch: the cluster engine's command that starts the ranks of a resumed run."""
    return request.mode.launch if isinstance(request.mode, Resume) else None


def _run(folder: RunFolder, request: RunRequest, console: Console) -> int:
    plan, outdir = folder.plan, folder.path
    platform = get_platform(plan.platform)
    for note in folder.notes:
        console.print(f"[yellow]repaired: {note}[/]", highlight=False)
    start = None
    try:
        start = _starter(folder, platform, request)
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
    record = _final_record(folder, outcome, start)
    if outcome.state == "failed":
        raise UserError(outcome.message or "the harness could not start", exit_code=outcome.exit_code)
    _show(folder, record, console)
    if record.state == "interrupted":
        launch = _launch_of(request)
        console.print(
            f"[yellow]interrupted: {sum(record.counts.values())} of {record.planned} kernels done; "
            f"continue with: deepbench-run --resume {shlex.quote(str(outdir))}"
            + (f" --launch {shlex.quote(launch)}" if launch else "")
            + "[/]"
        )
        return exit_status(signum=outcome.signum)
    return ExitCode.KERNEL_FAILURES if record.counts.get("failed") or record.counts.get("timeout") else ExitCode.OK


def _show(folder: RunFolder, record: RunRecord, console: Console) -> None:
    """The run's tables, its summary line, its warnings and how busy the machine was."""
    outdir = folder.path
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


def _starter(folder: RunFolder, platform: Platform, request: RunRequest) -> Starter:
    plan, outdir, plan_path = folder.plan, folder.path, folder.plan_path
    env, launch = dict(request.env), _launch_of(request)
    threads = plan.settings.threads
    if launch:  # ranks across nodes, started by the cluster's engine (its command was checked with the request)
        return lambda: RankedHarness(plan.backend, plan.settings.ranks, plan_path, outdir, threads, env, launch=launch)
    if folder.local and needs_engine(plan):  # all-reduce over several ranks: torchrun or mpirun starts them
        return lambda: RankedHarness(plan.backend, plan.settings.ranks, plan_path, outdir, threads, env)
    if folder.local:
        return lambda: LocalHarness(plan_path, outdir, env)
    starter = container_starter(
        plan_path,
        outdir,
        platform,
        request.container,
        env=env,
        recorded=folder.image,
        log=lambda line: make_console().print(line, highlight=False, markup=False),
    )
    run_folder.record_image(folder, starter.provenance)
    if needs_engine(plan):  # all ranks of this node in the one container, under torchrun or mpiexec
        with_ranks(starter.options, plan)
    return starter
