"""Which rank this process is, as the engine that started it says.

The harness does not start ranks itself: an existing engine does (torchrun, mpirun/mpiexec of
MPICH or Open MPI, Slurm's srun), and each names the rank in its own environment variables.
Reading them here lets every backend, and the harness's choice of where a rank writes, agree
without importing a communication library. It sits below both the harness and the backends
(a backend never imports the harness)."""

from __future__ import annotations

import os
from dataclasses import dataclass

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
