"""Collectives through torch.distributed: gloo on CPUs, NCCL on NVIDIA GPUs, RCCL on AMD GPUs.

PyTorch for ROCm builds its "nccl" process-group backend on RCCL with the same API, so one
class serves both; the library recorded in results says which it was (torch.version.hip).

Ranks come from the engine that started them (torchrun, mpirun, srun: kernels/launch_rank.py). One
rank with no engine (the smoke suite, `deepbench-run --local`) makes a real one-process group.
Control messages (barrier, the times and check outcomes every rank exchanges) go through a gloo
group beside the measured one, so they never queue on the GPU stream being timed."""

from __future__ import annotations

import atexit
import os
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ...launch_rank import launch_rank
from ...results import Settings
from ..contract.base import Unsupported
from . import graph_timing
from .common import Communicator, check_world
from .facts import cpu_model
from .graph_timing import GraphTimer
from .rendezvous import Rendezvous

# A collective call gives up after this share of the per-kernel timeout: the library then reports
# the broken call on the ranks still there, and rank 0 names the missing ones (rendezvous.census)
# and records the kernel, before the host's per-kernel timeout would kill every rank unheard.
COLLECTIVE_TIMEOUT_SHARE = 0.5

# torch.distributed's collectives without an out-of-place form: timed as a copy into the output then the
# in-place call (what torch's functional all_reduce does); the others call NCCL's out of place.
OUT_OF_PLACE_NOTE = (
    "torch.distributed has no out-of-place {op}: timed as a copy into the output then an in-place "
    "{op}, which is what torch's functional all_reduce does"
)
COPY_THEN_IN_PLACE = ("all_reduce", "broadcast", "reduce")
# PyTorch 2.13 renamed the tensor forms (the old names warn); older PyTorch in images has only the old ones.
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
# On a CPU the copy is a memcpy on the calling thread (numpy), not torch's copy_: that one runs on
# OpenMP threads that keep spinning after it and starve gloo's worker thread on a busy machine
# (one rank, 400 KB, 2 busy cores: 1.8-3.6 ms against 0.09-0.4 ms with the memcpy, in place
# 0.05-0.12 ms; docs/reports.md).
CPU_COPY_NOTE = "; on a CPU the copy is a memcpy on the calling thread"


# PyTorch's device memory: its caching allocator's cudaMalloc'd segments.
TORCH_BUFFERS = "PyTorch caching allocator (cudaMalloc)"


class TorchCommunicator(Communicator):
    # Why NCCL's own calls (nccl4py) are not used where the nccl backend would use them ('' elsewhere).
    fallback_reason: str = ""

    def __init__(self, pg_backend: str, settings: Settings) -> None:
        where = launch_rank()
        self.rank, self.size, self.local_rank, self.engine = where.rank, where.size, where.local_rank, where.engine
        check_world(self.size, settings, self.engine)
        self.pg_backend = pg_backend
        if pg_backend == "nccl":
            if not torch.cuda.is_available():
                raise RuntimeError("the nccl backend needs a GPU, and PyTorch sees none")
            self.device = torch.device("cuda", self.local_rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
            self.library = "rccl" if torch.version.hip else "nccl"
            self.buffers = TORCH_BUFFERS
        else:
            self.device = torch.device("cpu")
            self.library = "gloo"
        timeout = collective_timeout(settings)
        self.rendezvous: Rendezvous | None = None
        if not dist.is_initialized():
            atexit.register(_destroy)  # the group we made is ours to close (NCCL warns otherwise)
            if self.size == 1 and "MASTER_ADDR" not in os.environ:
                # One rank, no engine: a real process group of one (the call still runs).
                dist.init_process_group(pg_backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
            else:
                if "MASTER_ADDR" not in os.environ:
                    raise RuntimeError(
                        f"{self.size} ranks started by {self.engine} but MASTER_ADDR/MASTER_PORT are "
                        "not set: export them (deepbench launch-command prints them)"
                    )
                self.rendezvous = Rendezvous(self.rank, self.size)
                self.rendezvous.meet()
                self.rendezvous.init_process_group(pg_backend, timeout)
        self.control = dist.new_group(backend="gloo", timeout=timeout) if pg_backend != "gloo" else None
        if self.rendezvous:
            self.rendezvous.settled()

    def missing_ranks(self) -> str:
        return self.rendezvous.census() if self.rendezvous else ""

    def buffer(self, values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(values).to(self.device, copy=True)

    def empty(self, floats: int) -> torch.Tensor:
        return torch.empty(floats, dtype=torch.float32, device=self.device)

    def out_of_place_note(self, op: str) -> str:
        if op not in COPY_THEN_IN_PLACE:
            return ""
        return OUT_OF_PLACE_NOTE.format(op=op) + (CPU_COPY_NOTE if self.pg_backend == "gloo" else "")

    def graph_timer(self) -> GraphTimer | None:
        return GraphTimer(self.device) if self.device.type == "cuda" else None

    def _into(self, recv: torch.Tensor, send: torch.Tensor) -> torch.Tensor:
        """recv = send (see CPU_COPY_NOTE for the CPU's memcpy)."""
        if recv.device.type == "cpu":
            np.copyto(recv.numpy(), send.numpy())
        else:
            recv.copy_(send)
        return recv

    def all_reduce_in_place(self, buf: torch.Tensor) -> torch.Tensor:
        self.guarded(dist.all_reduce, buf)
        return buf

    def all_reduce(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        return self.all_reduce_in_place(self._into(recv, send))

    def all_gather(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        self.guarded(ALL_GATHER, recv, send)
        return recv

    def all_gather_in_place(self, buf: torch.Tensor, count: int) -> torch.Tensor:
        self.guarded(ALL_GATHER, buf, buf[self.rank * count : (self.rank + 1) * count])
        return buf

    def reduce_scatter(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        self.guarded(REDUCE_SCATTER, recv, send)
        return recv

    def reduce_scatter_in_place(self, buf: torch.Tensor, count: int) -> torch.Tensor:
        mine = buf[self.rank * count : (self.rank + 1) * count]  # NCCL's in place: the output at rank * count
        self.guarded(REDUCE_SCATTER, mine, buf)
        return mine

    def broadcast(self, send: torch.Tensor, recv: torch.Tensor, root: int) -> torch.Tensor:
        return self.broadcast_in_place(self._into(recv, send) if self.rank == root else recv, root)

    def broadcast_in_place(self, buf: torch.Tensor, root: int) -> torch.Tensor:
        self.guarded(dist.broadcast, buf, root)
        return buf

    def reduce(self, send: torch.Tensor, recv: torch.Tensor, root: int) -> torch.Tensor:
        return self.reduce_in_place(self._into(recv, send), root)

    def reduce_in_place(self, buf: torch.Tensor, root: int) -> torch.Tensor:
        self.guarded(dist.reduce, buf, root)
        return buf

    def all_to_all(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        self.guarded(dist.all_to_all_single, recv, send)
        return recv

    def send_recv(self, send: torch.Tensor, recv: torch.Tensor, to: int, source: int) -> torch.Tensor:
        if self.size == 1:
            raise Unsupported("send/recv on one rank: torch.distributed does not send to its own rank")
        ops = [dist.P2POp(dist.isend, send, to), dist.P2POp(dist.irecv, recv, source)]
        for work in self.guarded(dist.batch_isend_irecv, ops):
            work.wait()
        return recv

    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def to_host(self, buf: torch.Tensor) -> np.ndarray:
        return buf.cpu().numpy()

    def equal(self, buf: torch.Tensor, expected: np.ndarray) -> tuple[int, int]:
        want = torch.from_numpy(expected).to(self.device)
        bad = torch.nonzero(buf != want)
        return int(bad.numel()), int(bad[0, 0]) if bad.numel() else -1

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        self.guarded(dist.barrier, self.control)

    def allgather(self, values: list[float]) -> list[list[float]]:
        mine = torch.tensor(values, dtype=torch.float64)
        out = [torch.empty_like(mine) for _ in range(self.size)]
        self.guarded(dist.all_gather, out, mine, self.control)
        return [t.tolist() for t in out]

    def versions(self) -> dict[str, str]:
        v = {"torch": torch.__version__, "collective_library": self.library, "launcher": launcher_fact(self.engine)}
        if self.fallback_reason:
            v["nccl4py"] = f"not used: {self.fallback_reason} (torch.distributed's calls instead)"
        if self.device.type == "cuda":
            if torch.version.hip:
                v["rccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.nccl.is_available([]) else "?"
            else:
                v["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        else:
            v["gloo"] = f"bundled with torch {torch.__version__}"
        return v

    def device_facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "ranks": self.size,
            "rank_engine": self.engine,
            **(self.rendezvous.facts() if self.rendezvous else {}),
        }
        if self.device.type == "cuda":
            p = torch.cuda.get_device_properties(self.device)
            facts.update(
                kind="gpu",
                name=p.name,
                gpus_visible=torch.cuda.device_count(),
                memory_gib=round(p.total_memory / 2**30, 1),
            )
        else:
            facts.update(kind="cpu", name=cpu_model(), logical_cpus=os.cpu_count(), threads=torch.get_num_threads())
        return facts


def collective_timeout(settings: Settings) -> timedelta:
    return timedelta(seconds=settings.kernel_timeout_s * COLLECTIVE_TIMEOUT_SHARE)


def _destroy() -> None:
    if dist.is_initialized() and not graph_timing.captured():
        dist.destroy_process_group()


def launcher_fact(engine: str) -> str:
    """What started the ranks, recorded in the results (the host names the MPI it used)."""
    return os.environ.get("DEEPBENCH_LAUNCHER", engine if engine != "none" else "none (one rank, no launcher)")
