"""The run record: written by the harness at its end, and rewritten by the host when it had to
restart the harness (a crashed or timed-out kernel), so that it always counts every result."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from .. import __version__
from ..results import RESULTS_FILE, RUN_FILE, Plan, RunRecord, read_results, utcnow


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def build_record(plan: Plan, outdir: Path, state: str, started_at: datetime, facts: dict[str, Any]) -> RunRecord:
    results = read_results(outdir / RESULTS_FILE)
    planned = {item.id for item in plan.items}
    counts = Counter(r.status.value for r in results if r.id in planned)
    done = sum(counts.values())
    if state == "complete" and done < len(planned):
        state = "interrupted"
    return RunRecord(
        run_id=plan.run_id, tool_version=__version__, suite=plan.suite, platform=plan.platform,
        backend=plan.backend, settings=plan.settings, command=plan.command, state=state, planned=len(planned),
        counts=dict(counts), device=facts.get("device", {}), host=facts.get("host", {}),
        software=facts.get("software", {}), ceilings=facts.get("ceilings", {}),
        provenance=facts.get("provenance", {}), system=facts.get("system"), host_system=facts.get("host_system"),
        noise=facts.get("noise"), started_at=started_at, ended_at=utcnow(),
    )


def write_record(outdir: Path, record: RunRecord) -> None:
    write_atomic(outdir / RUN_FILE, record.model_dump_json(indent=1) + "\n")


FACTS_FILE = "facts.json"


def write_facts(outdir: Path, facts: dict[str, Any]) -> None:
    write_atomic(outdir / FACTS_FILE, json.dumps(facts, indent=1, default=str) + "\n")


def read_facts(outdir: Path) -> dict[str, Any]:
    path = outdir / FACTS_FILE
    return json.loads(path.read_text()) if path.exists() else {}
