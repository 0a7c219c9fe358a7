"""NCCL's own calls through nccl4py (NVIDIA's NCCL bindings for Python), beside torch.distributed.

torch.distributed has no out-of-place all-reduce, broadcast or reduce (torch_dist.py times a copy
plus the in-place call); NCCL has, and nccl-tests times NCCL's. Where nccl4py is installed (and the
GPU is NVIDIA's), the nccl backend makes its collectives through an nccl4py communicator of the
same ranks, on the same torch tensors and on torch's current stream (so that a CUDA graph
captures them as it captures torch's), and the result names it: collective_library
"nccl (nccl4py)". The torch process group stays for everything else: meeting the ranks, the
control messages on its gloo group, the record of which NCCL torch loaded. Without nccl4py the
torch calls are the fallback, named "nccl" as before.

nccl4py finds libnccl through cuda-pathfinder: PyTorch's nvidia-nccl package where that is what
is installed, so both sides use the same NCCL (versions() records the one nccl4py loaded).

The buffers come from ncclMemAlloc, as nccl-tests allocates them since NCCL 2.19 (common.cu
AllocateBuffs): memory NCCL can map into its peers and, when the calls are captured in a CUDA
graph, register for zero-copy transfers. PyTorch's caching allocator hands out cudaMalloc'd
memory, over which NCCL stages every transfer through its own buffers: on two H200s that read
20-35% below nccl-tests' bus bandwidth for all-gather, all-to-all and send/recv (the evidence and
the side-by-side A/B are in docs/collectives.md). The record names the allocator (info.buffers).

The communicators are configured as nccl-tests configures its own (--nccl-comm-config, default
nccl-tests: nvlinkCentricSched=1 on NCCL 2.28.2 and later, src/common.cu initComms), so that the
two compare like with like (on 2 and 4 H200s the harness's times moved by under 0.5% with it:
docs/collectives.md); the record names the configuration (info.comm_config)."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import torch
import torch.distributed as dist

from ...costs import FLOAT32_BYTES
from ...results import Settings
from ..collectives.declaration import COLLECTIVES
from ..collectives.torch_dist import TorchCommunicator

NCCL4PY_LIBRARY = "nccl (nccl4py)"
NCCL_BUFFERS = "ncclMemAlloc"
NVLINK_CENTRIC_SCHED_SINCE = (2, 28, 2)  # the NCCL that has ncclConfig_t.nvlinkCentricSched (nccl4py's doc)
NCCL_TESTS_CONFIG = "nvlinkCentricSched=1, as nccl-tests (src/common.cu initComms)"
NCCL_DEFAULTS = "NCCL's defaults"


def nccl4py_unavailable() -> str:
    """Why nccl4py cannot be used here ('' where it can): not installed, or its import fails (it
    needs cuda-core, cuda-pathfinder and cuda-bindings of the CUDA that PyTorch's NCCL was built for)."""
    try:
        if importlib.util.find_spec("nccl") is None:
            return "nccl4py is not installed"
        import nccl.core  # noqa: F401 - the import is the test
    except Exception as exc:  # noqa: BLE001 - any import failure means the fallback, with its reason
        return f"nccl4py does not load: {type(exc).__name__}: {str(exc)[:200]}"
    return ""


class Nccl4pyCommunicator(TorchCommunicator):
    """The torch communicator's ranks and control group, with NCCL's calls made through nccl4py."""

    def __init__(self, settings: Settings) -> None:
        super().__init__("nccl", settings)
        import nccl.core as nccl  # only where it loads: nccl4py_unavailable() said so

        self.nccl = nccl
        uid = [nccl.get_unique_id().as_bytes if self.rank == 0 else None]
        if self.size > 1:
            dist.broadcast_object_list(uid, src=0, group=self.control)
        config, self.comm_config = self._config(settings)
        self.nccl_comm = self.guarded(
            nccl.Communicator.init, self.size, self.rank, nccl.UniqueId.from_bytes(uid[0]), config
        )
        self.library = NCCL4PY_LIBRARY
        self.buffers = NCCL_BUFFERS

    def _config(self, settings: Settings) -> tuple[object | None, str]:
        """The communicators' NCCLConfig (None: NCCL's defaults) and what the record says of it."""
        if COLLECTIVES.options_of(settings).comm_config != "nccl-tests":
            return None, NCCL_DEFAULTS
        lib = self.nccl.get_version().libnccl
        version = tuple(int(x) for x in re.findall(r"\d+", str(lib.version))[:3]) if lib else ()
        if version < NVLINK_CENTRIC_SCHED_SINCE:
            return None, f"{NCCL_DEFAULTS} (NCCL {lib.version if lib else '?'} has no nvlinkCentricSched)"
        return self.nccl.NCCLConfig(nvlink_centric_sched=True), NCCL_TESTS_CONFIG

    def empty(self, floats: int) -> torch.Tensor:
        """`floats` float32 of ncclMemAlloc'd memory (the module says why), as a torch tensor: DLPack
        hands torch the cuda.core Buffer, which frees it (ncclMemFree) when the tensor goes."""
        raw = self.nccl.mem_alloc(max(floats, 1) * FLOAT32_BYTES, self.device.index)
        return torch.from_dlpack(raw).view(torch.float32)[:floats]

    def buffer(self, values: np.ndarray) -> torch.Tensor:
        buf = self.empty(values.size)
        buf.copy_(torch.from_numpy(values))
        return buf

    def _stream(self) -> int:
        """torch's current stream: inside a graph capture, the capturing stream."""
        return torch.cuda.current_stream(self.device).cuda_stream

    def out_of_place_note(self, op: str) -> str:
        return ""  # NCCL's own out-of-place calls

    def all_reduce_in_place(self, buf: torch.Tensor) -> torch.Tensor:
        return self.all_reduce(buf, buf)

    def all_reduce(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        self.guarded(self.nccl_comm.allreduce, send, recv, self.nccl.SUM, stream=self._stream())
        return recv

    def all_gather(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        self.guarded(self.nccl_comm.allgather, send, recv, stream=self._stream())
        return recv

    def all_gather_in_place(self, buf: torch.Tensor, count: int) -> torch.Tensor:
        return self.all_gather(buf[self.rank * count : (self.rank + 1) * count], buf)

    def reduce_scatter(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        self.guarded(self.nccl_comm.reduce_scatter, send, recv, self.nccl.SUM, stream=self._stream())
        return recv

    def reduce_scatter_in_place(self, buf: torch.Tensor, count: int) -> torch.Tensor:
        return self.reduce_scatter(buf, buf[self.rank * count : (self.rank + 1) * count])

    def broadcast(self, send: torch.Tensor, recv: torch.Tensor, root: int) -> torch.Tensor:
        self.guarded(self.nccl_comm.broadcast, send, recv, root, stream=self._stream())
        return recv

    def broadcast_in_place(self, buf: torch.Tensor, root: int) -> torch.Tensor:
        return self.broadcast(buf, buf, root)

    def reduce(self, send: torch.Tensor, recv: torch.Tensor, root: int) -> torch.Tensor:
        self.guarded(self.nccl_comm.reduce, send, recv, self.nccl.SUM, root=root, stream=self._stream())
        return recv

    def reduce_in_place(self, buf: torch.Tensor, root: int) -> torch.Tensor:
        return self.reduce(buf, buf, root)

    def all_to_all(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        self.guarded(self.nccl_comm.alltoall, send, recv, stream=self._stream())
        return recv

    def send_recv(self, send: torch.Tensor, recv: torch.Tensor, to: int, source: int) -> torch.Tensor:
        stream = self._stream()
        with self.nccl.group():  # one fused step, as nccl-tests' ncclGroupStart/End around the pair
            self.nccl_comm.send(send, to, stream=stream)
            self.nccl_comm.recv(recv, source, stream=stream)
        return recv

    def versions(self) -> dict[str, str]:
        v = super().versions()
        info = self.nccl.get_version()
        lib = info.libnccl
        v.update(
            collective_library=self.library,
            nccl4py=str(info.nccl4py),
            nccl4py_libnccl=f"{lib.version} ({lib.path})" if lib else "not loaded",
        )
        return v
