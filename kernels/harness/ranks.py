"""Where each rank keeps its records: ranks other than 0 write under OUT/ranks/rank-K/, and one
that fails says why there, for the host to name the rank that failed first. Which rank this
process is comes from the engine that started it (kernels/launch_rank.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

RANKS_DIR = "ranks"


def rank_dir_name(rank: int) -> str:
    """Folder (under the run's folder) where a rank other than 0 keeps its own records."""
    return f"rank-{rank}"


# A rank other than 0 prints nothing the host reads (only rank 0 speaks to it), so each keeps its
# own stderr in its folder and, when it fails, says why in a small file there: the host reads
# these to tell the user which rank failed first, why, and where its log is.
RANK_LOG = "harness.log"
FAILURE_FILE = "failure.json"


def record_failure(rank_dir: Path, rank: int, message: str) -> None:
    """Say why this rank stops (best effort: a rank that cannot write has nothing better to do)."""
    doc = {"rank": rank, "message": message[:2000], "at": time.time()}
    try:
        tmp = rank_dir / f".{FAILURE_FILE}.tmp"
        tmp.write_text(json.dumps(doc) + "\n")
        os.replace(tmp, rank_dir / FAILURE_FILE)
    except OSError:
        pass


def rank_failures(run_dir: Path, since: float = 0.0) -> list[dict]:
    """Failures recorded by ranks under `run_dir` after `since` (a time.time()), first first;
    each with the rank's log path."""
    found = []
    for path in sorted((run_dir / RANKS_DIR).glob(f"rank-*/{FAILURE_FILE}")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("at"), (int, float)) and doc["at"] >= since:
            found.append({**doc, "log": str(path.parent / RANK_LOG)})
    return sorted(found, key=lambda d: d["at"])
