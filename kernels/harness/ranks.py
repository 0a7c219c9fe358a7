"""Which rank this process is, as the engine that started it says.

The harness does not start ranks itself: an existing engine does (torchrun, mpirun/mpiexec of
MPICH or Open MPI, Slurm's srun), and each names the rank in its own environment variables.
Reading them here lets every backend, and the harness's choice of where a rank writes, agree
without importing a communication library."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

# (rank, world size, local rank) variables, in the order they are trusted: torchrun's (also
# what users export for torch.distributed), Open MPI's, MPICH/Hydra's and Intel MPI's, Slurm's.
ENGINES: tuple[tuple[str, str, str, str], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
)


@dataclass(frozen=True)
class LaunchRank:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    engine: str = "none"

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the run's results and speaks to the host; the others write their own."""
        return self.rank == 0


def launch_rank(env: dict[str, str] | None = None) -> LaunchRank:
    env = dict(os.environ if env is None else env)
    for engine, rank, size, local in ENGINES:
        if rank in env and size in env:
            r, n = int(env[rank]), int(env[size])
            return LaunchRank(r, n, int(env.get(local, r)), engine)
    return LaunchRank()


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
