"""Collective backends (all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all,
send/recv), one module per communication library.

- torch_dist.py: torch.distributed with gloo (CPU), NCCL (NVIDIA) or RCCL (ROCm); torch_backends.py: the
  gloo/nccl/rccl backends and the communicator each uses.
- nccl4py_comm.py: NCCL's own calls through nccl4py on NVIDIA GPUs, where it is installed.
- mpi.py: MPI through mpi4py, whichever MPI mpi4py loaded (a pip wheel's MPICH or Open MPI, or the
  system's); device buffers only where that MPI is CUDA-aware.
- problems.py: each collective's inputs, calls and exact expected result on one rank.
- common.py: what they share: exact checks, rank-synchronised timing, bandwidths;
  graph_timing.py: CUDA graph replays timed by events (nccl-tests' -G).

Ranks are started by existing engines (torchrun, mpirun, srun), never by this package."""
