"""The plan a new run's request asks for, and the folder it goes to: `deepbench-run` writes it under
the folder's lock (run_folder.create), `deepbench launch-command` into a folder that cluster engines
start harnesses on without deepbench-run (write_plan)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from deepbench.kernels.results import PLAN_FILE, RESULTS_FILE, Plan
from deepbench.kernels.results_file import exists as results_file_exists
from deepbench.kernels.results_file import write_atomic

from ...errors import UserError
from ...outpaths import writable_folder
from .planning import default_precisions, plan_items
from .provenance import command_line
from .request import RunRequest
from .run_folder import DEFAULT_RESULTS, check_place


def plan_for(request: RunRequest) -> tuple[Plan, Path]:
    """The plan the request asks for, and the folder it goes to (nothing is written)."""
    platform, chosen = request.run_platform, request.selection
    kernels = request.kernels
    suite_name = chosen.suite.replace(":", "-").replace("/", "_")  # model:FILE must not make a path or a volume spec
    run_id = f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{platform.name}-{suite_name}"
    outdir = request.results.out or DEFAULT_RESULTS / run_id
    backend = request.plan_backend(platform)
    plan = Plan(
        run_id=run_id,
        suite=chosen.suite,
        platform=platform.name,
        backend=backend,
        settings=request.settings(platform, backend),
        items=tuple(plan_items(kernels, chosen.precisions, platform)),
        command=command_line(),
        selection=chosen.record(default_precisions(kernels, platform)),
        frozen_suite_sha256=chosen.frozen_suite_sha256,
    )
    return plan, outdir


def write_plan(request: RunRequest) -> tuple[Plan, Path]:
    """The plan, written into its folder for harnesses that an engine starts without deepbench-run
    (deepbench launch-command)."""
    plan, outdir = plan_for(request)
    check_place(outdir)
    writable_folder(outdir)
    for name in (RESULTS_FILE, PLAN_FILE):
        if results_file_exists(outdir / name):
            raise UserError(f"{outdir} already holds a run ({name}): choose another --out")
    write_atomic(outdir / PLAN_FILE, plan.model_dump_json(indent=1) + "\n")
    return plan, outdir
