"""The harness: `python -m deepbench.kernels.harness PLAN OUTDIR`.

Runs inside the platform's container (or in a subprocess with --local). Reads the plan, skips
items already in OUTDIR/results.jsonl (so a restarted or resumed run continues), appends one
result per kernel as soon as it is measured, prints one JSON event per line on stdout for the
host's progress display, and writes the run record at the end. SIGINT or SIGTERM stops after
the record is written: every finished kernel is kept.

Exit status: 0 complete, 130 interrupted, 3 the backend cannot load on this machine.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from ..backends import load_backend
from ..noise import judge, snapshot, usable_cpus
from ..precision import Precision
from ..provenance import harness_provenance
from ..results import RESULTS_FILE, Plan, append_result, read_results, utcnow
from ..system import collect_system
from .execute import run_item
from .faults import maybe_inject
from .facts import host_facts
from .ranks import RANKS_DIR, launch_rank, rank_dir_name
from .record import build_record, write_facts, write_record

EXIT_INTERRUPTED = 130
EXIT_BACKEND_UNAVAILABLE = 3


# Ranks other than 0 (collectives started by torchrun/mpirun/srun) stay silent: the host reads
# rank 0's events only, and each of them writes its own records under OUTDIR/ranks/rank-K/.
_SILENT = False


def emit(event: str, **fields: Any) -> None:
    if not _SILENT:
        print(json.dumps({"event": event, **fields}), flush=True)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deepbench.kernels.harness", description=__doc__)
    parser.add_argument("plan", type=Path)
    parser.add_argument("outdir", type=Path)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)

    plan = Plan.model_validate_json(args.plan.read_text())
    noise_before = snapshot()  # before this process opens the GPU: any process on it is someone else's
    outdir: Path = args.outdir
    outdir.mkdir(parents=True, exist_ok=True)
    started = utcnow()
    global _SILENT
    _SILENT = not launch_rank().is_main
    try:
        backend = load_backend(plan.backend, plan.settings)
    except (ImportError, RuntimeError) as exc:
        emit("error", message=f"backend '{plan.backend}' cannot run here: {exc}")
        return EXIT_BACKEND_UNAVAILABLE
    rank = getattr(backend, "rank", launch_rank().rank)
    _SILENT = rank != 0
    run_dir = outdir  # rank 0's results are the run's; the plan's progress is rank 0's for every rank
    if rank != 0:
        outdir = run_dir / RANKS_DIR / rank_dir_name(rank)
        outdir.mkdir(parents=True, exist_ok=True)
    facts = {"host": host_facts(), "device": backend.device_facts(), "software": backend.library_versions()}
    emit("facts", device=facts["device"].get("name", ""))
    try:
        precisions = sorted({Precision(i.precision) for i in plan.items}, key=list(Precision).index)
        facts["ceilings"] = backend.ceilings(precisions)  # a CPU measures a GEMM in each of them
    except Exception as exc:  # noqa: BLE001 - ceilings are optional; say why they are missing
        facts["ceilings"] = {}
        facts["device"]["ceilings_error"] = str(exc)
    # The system description and provenance are collected here, where the kernels run.
    facts["system"] = collect_system(libraries=facts["software"]).model_dump(mode="json")
    facts["provenance"] = harness_provenance(plan, started)
    write_facts(outdir, facts)

    results_path = outdir / RESULTS_FILE
    done = {r.id for r in read_results(run_dir / RESULTS_FILE)}
    todo = [item for item in plan.items if item.id not in done]
    state = "complete"
    try:
        for i, item in enumerate(todo):
            emit("start", id=item.id, index=len(done) + i, total=len(plan.items))
            # Several ranks begin each kernel together, after rank 0 told the host which one it is:
            # whatever befalls one rank from here is that kernel's.
            if hasattr(backend, "item_barrier"):
                backend.item_barrier()
            maybe_inject(item.id)
            result = run_item(backend, item, plan.settings)
            append_result(results_path, result)
            emit("done", id=item.id, status=result.status.value,
                 median_us=result.time_us.median if result.time_us else None, reason=result.reason[:200])
            if getattr(backend, "broken", ""):  # a rank is gone: this process group cannot go on
                emit("restart", reason=backend.broken)
                state = "interrupted"
                break
    except KeyboardInterrupt:
        state = "interrupted"
    s = plan.settings
    facts["noise"] = judge(noise_before, snapshot(), usable_cpus(), s.threads, gpu_run=s.device != "cpu",
                           shared_cpus=s.ranks > 1 and s.device == "cpu").model_dump(mode="json")
    try:
        facts["device"].update(backend.device_facts_after())
        write_facts(outdir, facts)
    except Exception as exc:  # noqa: BLE001 - end-of-run facts are optional; say why they are missing
        facts["device"]["after_error"] = str(exc)
    record = build_record(plan, outdir, state, started, facts)
    write_record(outdir, record)
    emit("end", state=record.state)
    return EXIT_INTERRUPTED if state == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())
