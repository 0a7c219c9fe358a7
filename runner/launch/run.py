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

import argparse
import os
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from deepbench.kernels.backends import BACKENDS, declaration_of
from deepbench.kernels.backends.contract.declared_precisions import makers_of
from deepbench.kernels.harness.protocol import ExitCode
from deepbench.kernels.harness.record import build_record, read_facts, write_record
from deepbench.kernels.padding import PadMode
from deepbench.kernels.precision import DECLARED_ONLY, PRECISIONS, Precision
from deepbench.kernels.results import (
    INPUT_DISTRIBUTIONS,
    MAX_SEED,
    PLAN_FILE,
    RESULTS_FILE,
    Plan,
    RunRecord,
    Settings,
    Status,
)
from deepbench.kernels.results_file import REJECTED_FILE, WriteFailed, read_results, write_atomic
from deepbench.kernels.results_file import exists as results_file_exists
from deepbench.kernels.suites import SelectionError

from ..analysis.sanity import context_of
from ..analysis.sources import load_run
from ..analysis.summary import groups, summary_line
from ..backend_options import add_backend_arguments, options_from
from ..errors import UserError
from ..option_types import integer, ranged, usable_cpus
from ..outpaths import writable_folder
from ..platforms import PLATFORMS, Platform, get_platform
from ..render.display import RunProgress, make_console, print_noise, print_tables
from ..render.tables import tables
from ..selection import KernelSelection, add_selection_arguments
from ..setting_ranges import MAX_LOCK_MHZ, RANGES
from . import run_folder
from .container import DEFAULT_PIDS_LIMIT, MEMORY_SHARE, container_starter, parse_env
from .devices import check_host
from .local import LocalHarness
from .modes import MODES
from .planning import default_precisions, plan_items
from .provenance import with_host_facts
from .ranks import RankedHarness, add_rank_arguments, launched_argv, needs_engine, plan_backend, with_ranks
from .run_folder import RunFolder
from .signals import exit_status, stop_on_signals
from .supervise import Outcome, supervise

DESCRIPTION = __doc__
DEFAULT_RESULTS = Path("deepbench-results")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("where to run")
    where.add_argument(
        "--platform", metavar="P", help=f"{', '.join(PLATFORMS)} (default: cpu with --local, else required)"
    )
    where.add_argument(
        "--local", action="store_true", help="run the harness in a subprocess on this machine, with no container"
    )
    where.add_argument("--backend", metavar="B", help=_backend_help())
    image = parser.add_argument_group("container (without --local)")
    image.add_argument(
        "--image",
        metavar="REF",
        help="image to run in (default: deepbench/<platform>:<version>, built from images/<vendor>/ when missing)",
    )
    fetch = image.add_mutually_exclusive_group()
    fetch.add_argument("--pull", action="store_true", help="pull the image before running")
    fetch.add_argument("--build", action="store_true", help="(re)build the image before running")
    image.add_argument("--base-image", metavar="IMAGE", help="when building: the base (default: the vendor's)")
    image.add_argument("--wheelhouse", type=Path, metavar="DIR", help="when building: install from DIR, offline")
    image.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory limit of the container, e.g. 8g, or none "
        f"(default: {MEMORY_SHARE * 100:.0f}%% of this host's memory)",
    )
    image.add_argument(
        "--pids-limit",
        type=int,
        metavar="N",
        help=f"processes and threads the container may hold (default {DEFAULT_PIDS_LIMIT}; 0: no limit)",
    )
    image.add_argument(
        "--force-image",
        action="store_true",
        help="run --image even when it is not a deepbench image of this platform and version (its labels)",
    )
    image.add_argument(
        "--env", action="append", metavar="NAME=VALUE", help="environment variable for the harness (repeatable)"
    )
    add_selection_arguments(parser)
    add_rank_arguments(parser)
    parser.add_argument("--precision", metavar="P", help=_precision_help())
    m = parser.add_argument_group("measurement")
    mode = m.add_mutually_exclusive_group()
    mode.add_argument(
        "--fast",
        dest="mode",
        action="store_const",
        const="fast",
        help="5%% precision, 0.2 s cap per direction, no minimum time (default: 1%% precision, "
        "at least 0.2 s of samples, 1 s under the GPU's power limiter, 1 s cap)",
    )
    mode.add_argument(
        "--rigorous",
        dest="mode",
        action="store_const",
        const="rigorous",
        help="0.5%% precision, 20+ samples, at least 1 s of samples, 10 s cap per direction",
    )
    m.add_argument(
        "--time-cap", type=ranged("time_cap_s"), metavar="S", help="seconds per direction before giving up on precision"
    )
    m.add_argument(
        "--min-sample",
        type=ranged("min_sample_s"),
        metavar="S",
        help="calls per sample until a sample lasts at least this long (default 0.001; a collective's "
        "back-to-back calls overlap as in nccl-tests' 100-call launches only in longer samples)",
    )
    m.add_argument(
        "--warm-up",
        type=ranged("warm_up_s"),
        metavar="S",
        help="GPU: at most this long, a large GEMM before the first kernel until the temperature settles "
        "(default 30, --rigorous 120, --fast 0; 0 skips it)",
    )
    m.add_argument(
        "--target",
        type=ranged("target_rel_precision"),
        metavar="REL",
        help="relative precision of the median to reach (0.01 = 1%%)",
    )
    m.add_argument(
        "--kernel-timeout",
        type=ranged("kernel_timeout_s"),
        default=600.0,
        metavar="S",
        help="kill and record as timeout a kernel running longer than this (default 600)",
    )
    m.add_argument(
        "--threads",
        type=integer(1, usable_cpus, " (the CPUs this process may use)"),
        metavar="N",
        help="CPU threads (default: all)",
    )
    m.add_argument(
        "--seed",
        type=integer(int(RANGES["seed"].low), int(RANGES["seed"].high)),
        default=0,
        help=f"seed of the random inputs, 0 to {MAX_SEED} (default 0)",
    )
    m.add_argument("--cold", action="store_true", help="GPU: flush the L2 cache before every call")
    m.add_argument(
        "--verify-timing", action="store_true", help="GPU: cross-check each time with the profiler's kernel durations"
    )
    m.add_argument(
        "--pad",
        choices=[p.value for p in PadMode],
        default=PadMode.DEEPBENCH.value,
        help="the problem handed to the library: deepbench (default) pads as DeepBench did (tensor-core "
        "GEMMs to multiples of 8 by layout, int8 GEMM m to 4, half convolution channels to 8, int8 "
        "ones to 4 then 32); none runs the listed shape; both measures the padded shape and the raw "
        "one beside it (the alignment penalty, raw over padded)",
    )
    m.add_argument(
        "--kernel-time",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="GPU: time calls under 20 us by their kernels' own durations (CUPTI), without the GPU's "
        "0.1-0.3 us between two dependent kernels that back-to-back calls pay (default); "
        "--no-kernel-time times them by events of back-to-back graph replays, as a native loop "
        "would, and starts no CUPTI (unless --verify-timing)",
    )
    m.add_argument(
        "--inputs",
        choices=INPUT_DISTRIBUTIONS,
        default=Settings.model_fields["inputs"].default,
        help="what the operands are drawn from: normal (default), uniform [0, 1), zeros, or deepbench "
        "(what DeepBench's binaries drew: zeros for half and int8, uniform [0, 1) for float); "
        "zeros draw less power, so a GPU holds a higher clock. Recorded in every result",
    )
    m.add_argument(
        "--energy",
        action="store_true",
        help="after each part's time, read the energy meter around a loop of its calls (NVML's counter "
        "on NVIDIA, RAPL or a Raspberry Pi 5's PMIC on a CPU): joules per call, watts, GFLOP/J",
    )
    m.add_argument(
        "--energy-window",
        type=ranged("energy_window_s"),
        metavar="S",
        default=Settings.model_fields["energy_window_s"].default,
        help="--energy: read the meter over at least this long per part (default %(default)s; at least "
        "10 of the meter's updates in any case)",
    )
    m.add_argument(
        "--lock-clocks",
        type=lock_clocks,
        metavar="max|MHZ",
        help="GPU: ask NVML to lock the SM clock for the run (max: the highest supported), restored at "
        "the end; needs root, and the run records whether it was granted",
    )
    add_backend_arguments(parser)
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
    parser.set_defaults(mode="default")


def _backend_help() -> str:
    """--backend's help, from the declarations: each platform's backend (one that routes each operation
    to another backend's library names those), and every other backend."""
    chosen = []
    for platform in PLATFORMS.values():
        delegates = declaration_of(platform.backend).delegates
        chosen.append(
            f"{platform.name}: {platform.backend}"
            + (f" (each operation on {', '.join(delegates)})" if delegates else "")
        )
    return (
        f"harness backend, one of {', '.join(BACKENDS)} (default: the platform's; {'; '.join(chosen)}); "
        "name one to force it for every kernel"
    )


def _precision_help() -> str:
    """--precision's help: every precision, those that name one library call's arithmetic with the
    backends that declare them (kernels/backends/contract/declared_precisions.py)."""
    common = ", ".join(p.value for p in Precision if p not in DECLARED_ONLY)
    declared_only = "; ".join(
        f"{p.value} ({PRECISIONS[p].description}; the {', '.join(makers_of(p))} backend only)" for p in DECLARED_ONLY
    )
    return f"comma-separated: {common}, or {declared_only} (default: the platform's DeepBench precisions for the suite)"


def run(args: argparse.Namespace) -> int:
    console = make_console()
    with stop_on_signals():
        try:
            folder = _open_folder(args)
        except KeyboardInterrupt as exc:
            console.print("[yellow]interrupted before the run started: nothing was measured[/]")
            return exit_status(exc)
        return _run(folder, args, console)


def _open_folder(args: argparse.Namespace) -> RunFolder:
    if args.launch and not args.resume:
        raise UserError("--launch starts the plan that deepbench launch-command wrote: name its folder with --resume")
    if args.retry and not args.resume:
        raise UserError(
            "--retry measures again the failed or timed-out kernels of a run: name its folder with --resume"
        )
    if args.resume:
        return run_folder.reopen(args.resume, args, getattr(args, "explicit", set()))
    platform = get_platform(args.platform or ("cpu" if args.local else _no_platform()))
    if not args.local:
        check_host(platform, log=make_console().print)  # its devices, before a plan, a build or a pull
    plan, outdir = plan_for(args, platform)
    return run_folder.create(outdir, plan, bool(args.local))


def _run(folder: RunFolder, args: argparse.Namespace, console) -> int:
    plan, outdir, local = folder.plan, folder.path, folder.local
    platform = get_platform(plan.platform)
    for note in folder.notes:
        console.print(f"[yellow]repaired: {note}[/]", highlight=False)
    start = None
    try:
        start = _starter(folder, platform, args)
        console.print(
            f"[bold]deepbench-run[/] {plan.suite} on {platform.name} "
            f"({_where(args, local)}, backend {plan.backend}): "
            f"{len(plan.items)} kernels, {folder.done} already done -> {outdir}"
        )
        with RunProgress(console, total=len(plan.items), done=folder.done) as progress:
            if args.quiet:
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
    results = read_results(outdir / RESULTS_FILE)
    source = load_run(outdir)
    ctx = context_of(source)
    print_tables(console, tables(results, ctx), how_to_see=f"deepbench report {shlex.quote(str(outdir))} --columns all")
    console.print(f"{summary_line(groups(list(source.entries), ctx), plan.suite)}; results in {outdir}")
    for warning in record.device.get("warnings", []):  # e.g. emulation, a throttled board
        console.print(f"[yellow]warning: {warning}[/]")
    print_noise(console, record.noise)
    if record.state == "interrupted":
        console.print(
            f"[yellow]interrupted: {sum(record.counts.values())} of {record.planned} kernels done; "
            f"continue with: deepbench-run --resume {shlex.quote(str(outdir))}"
            + (f" --launch {shlex.quote(args.launch)}" if args.launch else "")
            + "[/]"
        )
        return exit_status(signum=outcome.signum)
    return ExitCode.KERNEL_FAILURES if record.counts.get("failed") or record.counts.get("timeout") else ExitCode.OK


def _final_record(folder: RunFolder, outcome: Outcome, start) -> RunRecord:
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


def _where(args: argparse.Namespace, local: bool) -> str:
    if args.launch:
        return f"ranks started by {shlex.split(args.launch)[0]}"
    return "local" if local else "container"


RETRY_STATUSES = (Status.FAILED.value, Status.TIMEOUT.value)


def retry_statuses(text: str) -> tuple[str, ...]:
    """--retry's value: statuses whose kernels a resume measures again."""
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    wrong = [x for x in names if x not in RETRY_STATUSES]
    if not names or wrong:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(RETRY_STATUSES)} (comma-separated), not {text!r}")
    return names


def _no_platform() -> str:
    raise UserError(
        f"say where to run: --local (this machine, no container) or --platform P (one of: {', '.join(PLATFORMS)})"
    )


def settings_from(args: argparse.Namespace, platform: Platform, backend: str | None = None) -> Settings:
    """The settings the command line asks for; `backend`: the plan's, whose backends' options are
    all recorded (runner/backend_options.py)."""
    preset = MODES[args.mode].copy()
    if args.time_cap is not None:
        preset["time_cap_s"] = args.time_cap
    if args.target is not None:
        preset["target_rel_precision"] = args.target
    if args.warm_up is not None:
        preset["warm_up_s"] = args.warm_up
    if args.min_sample is not None:
        preset["min_sample_s"] = args.min_sample
    if preset["time_cap_s"] >= args.kernel_timeout:
        raise UserError(
            f"--time-cap ({preset['time_cap_s']:g} s per direction) must be shorter than --kernel-timeout "
            f"({args.kernel_timeout:g} s), or every kernel would be killed as a timeout"
        )
    if args.lock_clocks is not None and platform.device == "cpu":
        raise UserError("--lock-clocks locks a GPU's clocks (NVML): this run is on a CPU")
    return Settings(
        mode=args.mode,
        threads=args.threads,
        seed=args.seed,
        device=platform.device,
        cold=args.cold,
        verify_timing=args.verify_timing,
        kernel_time=args.kernel_time,
        kernel_timeout_s=args.kernel_timeout,
        pad=args.pad,
        backend_options=options_from(args, backend),
        ranks=getattr(args, "ranks", 1),
        inputs=args.inputs,
        energy=args.energy,
        energy_window_s=args.energy_window,
        lock_clocks=args.lock_clocks,
        **preset,
    )


def lock_clocks(value: str) -> int | str:
    """--lock-clocks: 'max' or a clock in MHz."""
    if value == "max":
        return value
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r}: give max, or the SM clock in MHz")
    return integer(1, MAX_LOCK_MHZ)(value)


def _new_plan(args: argparse.Namespace, platform: Platform) -> tuple[Plan, Path]:
    """The plan, written into its folder for harnesses that an engine starts without deepbench-run
    (deepbench launch-command); deepbench-run writes it under the folder's lock (run_folder.create)."""
    plan, outdir = plan_for(args, platform)
    writable_folder(outdir)
    for name in (RESULTS_FILE, PLAN_FILE):
        if results_file_exists(outdir / name):
            raise UserError(f"{outdir} already holds a run ({name}): choose another --out")
    write_atomic(outdir / PLAN_FILE, plan.model_dump_json(indent=1) + "\n")
    return plan, outdir


def plan_for(args: argparse.Namespace, platform: Platform) -> tuple[Plan, Path]:
    """The plan the command line asks for, and the folder it goes to (nothing is written)."""
    for flag, value in (
        ("--ops", args.ops),
        ("--precision", args.precision),
        ("--suite", args.suite),
        *(("--where", w) for w in args.where or ()),
    ):
        if value is not None and not value.strip(" ,"):
            raise UserError(
                f"{flag} is empty: name at least one, or leave the option out for its default "
                f"(see deepbench-run --help)"
            )
    chosen = KernelSelection.from_args(args)
    try:
        kernels = chosen.kernels
    except SelectionError as exc:
        raise UserError(str(exc)) from None
    if not kernels:
        raise UserError("the selection matches no kernel (see: deepbench list --suite ... --where ...)")
    suite_name = args.suite.replace(":", "-").replace("/", "_")  # model:FILE must not make a path or a volume spec
    run_id = f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{platform.name}-{suite_name}"
    outdir = args.out or DEFAULT_RESULTS / run_id
    selection = chosen.record(default_precisions(kernels, platform))
    backend = plan_backend(args.backend or platform.backend, getattr(args, "ranks", 1), platform, list(kernels))
    plan = Plan(
        run_id=run_id,
        suite=args.suite,
        platform=platform.name,
        backend=backend,
        settings=settings_from(args, platform, backend),
        items=tuple(plan_items(kernels, chosen.precisions, platform)),
        command=shlex.join([os.path.basename(sys.argv[0]), *sys.argv[1:]]),
        selection=selection,
        frozen_suite_sha256=chosen.frozen_suite_sha256,
    )
    return plan, outdir


def _starter(folder: RunFolder, platform: Platform, args: argparse.Namespace):
    plan, outdir, plan_path = folder.plan, folder.path, folder.plan_path
    env = parse_env(args.env)
    if args.launch:  # ranks across nodes, started by the cluster's engine
        launched_argv(args.launch, plan_path, outdir)  # a wrong command is said now, not at the first start
        return lambda: RankedHarness(
            plan.backend, plan.settings.ranks, plan_path, outdir, plan.settings.threads, env, launch=args.launch
        )
    if folder.local and needs_engine(plan):  # all-reduce over several ranks: torchrun or mpirun starts them
        return lambda: RankedHarness(plan.backend, plan.settings.ranks, plan_path, outdir, plan.settings.threads, env)
    if folder.local:
        return lambda: LocalHarness(plan_path, outdir, env)
    starter = container_starter(
        plan_path,
        outdir,
        platform,
        image=args.image,
        want_pull=args.pull,
        want_build=args.build,
        env=env,
        memory=args.memory,
        pids_limit=args.pids_limit,
        base_image=args.base_image,
        wheelhouse=args.wheelhouse,
        force_image=args.force_image,
        recorded=folder.image,
        log=lambda line: make_console().print(line, highlight=False, markup=False),
    )
    run_folder.record_image(folder, starter.provenance)
    if needs_engine(plan):  # all ranks of this node in the one container, under torchrun or mpiexec
        with_ranks(starter.options, plan)
    return starter
