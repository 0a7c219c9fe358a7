"""The mpi backend: collectives through mpi4py on whichever MPI it loads (backend.py)."""
