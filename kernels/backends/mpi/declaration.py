"""What the mpi backend declares, importable without mpi4py: its binding and the engine of its ranks
(mpirun or mpiexec, MPICH's or Open MPI's: runner/launch/ranks/engines.py tells them apart)."""

from __future__ import annotations

from ..collectives.declaration import MAX_EXACT_RANKS, MPIRUN
from ..contract.declaration import BackendDeclaration, NoOptions


class MpiDeclaration(BackendDeclaration[NoOptions]):
    libraries = ("mpi4py",)
    launcher = MPIRUN
    max_ranks = MAX_EXACT_RANKS
    install_hint = "pip install 'deepbench[mpi]' (mpi4py and MPICH's wheel), or a system MPI"


MPI = MpiDeclaration("mpi", NoOptions)
