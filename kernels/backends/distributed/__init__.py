"""Collective backends (all-reduce), one module per communication library.

- torch_dist.py: torch.distributed with gloo (CPU), NCCL (NVIDIA) or RCCL (ROCm).
- mpi.py: MPI through mpi4py (MPI_Allreduce), whichever MPI mpi4py loaded (a pip wheel's MPICH or
  Open MPI, or the system's); device buffers only where that MPI is CUDA-aware.
- common.py: what they share: exact data and checks, rank-synchronised timing, bandwidths.

Ranks are started by existing engines (torchrun, mpirun, srun), never by this package."""
