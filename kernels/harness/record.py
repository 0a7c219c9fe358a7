"""The run record: written by the runner when a run starts, by the harness at its end, and
again by the runner when the run stops, so that it always counts every result.

Each writer keeps what the earlier record knew and it does not (the run's segments, the plan's
hash, how the run was launched): a harness ending after its deepbench-run was killed must not
erase the record of a container run's image, or a resume would not know where to continue."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import __version__
from ..format_versions import NewerFormat, read_model
from ..provenance import merge_provenance
from ..results import RESULTS_FILE, RUN_FILE, Plan, RunRecord, RunState, utcnow
from ..results_file import scan, write_atomic


def read_record(outdir: Path) -> RunRecord | None:
    """The folder's run record, or None when it has none or it cannot be read; one of a newer
    format is an error (NewerFormat), never replaced by a record this version writes."""
    try:
        return read_model(RunRecord, (outdir / RUN_FILE).read_bytes(), str(outdir / RUN_FILE))
    except NewerFormat:
        raise
    except (OSError, ValueError):
        return None


def build_record(plan: Plan, outdir: Path, state: RunState, started_at: datetime, facts: dict[str, Any]) -> RunRecord:
    """The run record now. Results count once per planned kernel (a duplicate line never counts
    twice); the run started when its first segment did."""
    by_id = {r.id: r for r in scan(outdir / RESULTS_FILE).results}
    planned = {item.id for item in plan.items}
    counts = Counter(r.status.value for i, r in by_id.items() if i in planned)
    done = sum(counts.values())
    if state == "complete" and done < len(planned):
        state = "interrupted"
    prior = read_record(outdir)
    provenance = facts.get("provenance", {})
    if prior is not None:
        provenance = merge_provenance(prior.provenance.model_dump(mode="json", exclude_none=True), provenance)
        started_at = min(started_at, prior.started_at)
    return RunRecord(
        run_id=plan.run_id,
        tool_version=__version__,
        suite=plan.suite,
        platform=plan.platform,
        backend=plan.backend,
        settings=plan.settings,
        command=plan.command,
        state=state,
        planned=len(planned),
        counts=dict(counts),
        device=facts.get("device") or (prior.device if prior else {}),
        host=facts.get("host") or (prior.host if prior else {}),
        software=facts.get("software") or (prior.software if prior else {}),
        ceilings=facts.get("ceilings") or (prior.ceilings if prior else {}),
        provenance=provenance,
        system=facts.get("system") or (prior.system if prior else None),
        host_system=facts.get("host_system") or (prior.host_system if prior else None),
        noise=facts.get("noise") or (prior.noise if prior else None),
        started_at=started_at,
        ended_at=utcnow(),
        segments=prior.segments if prior else (),
        plan_sha256=prior.plan_sha256 if prior else None,
    )


def write_record(outdir: Path, record: RunRecord) -> None:
    write_atomic(outdir / RUN_FILE, record.model_dump_json(indent=1) + "\n")


FACTS_FILE = "facts.json"


def write_facts(outdir: Path, facts: dict[str, Any]) -> None:
    write_atomic(outdir / FACTS_FILE, json.dumps(facts, indent=1, default=str) + "\n")


def read_facts(outdir: Path) -> dict[str, Any]:
    path = outdir / FACTS_FILE
    return json.loads(path.read_text()) if path.exists() else {}
