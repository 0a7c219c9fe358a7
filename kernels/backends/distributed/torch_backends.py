"""The torch.distributed backends (`--backend gloo|nccl|rccl`): which communicator each uses. On
NVIDIA GPUs the nccl backend makes NCCL's own calls through nccl4py where it loads (nccl4py_comm.py),
else torch.distributed's (torch_dist.py), named in the result."""

from __future__ import annotations

import os
from typing import Any

import torch

from ...results import Settings
from .common import CollectiveBackend, CollectiveRunner
from .nccl4py_comm import Nccl4pyCommunicator, nccl4py_unavailable
from .torch_dist import TorchCommunicator


class TorchDistributedBackend(CollectiveBackend):
    """torch.distributed as a backend of its own (`--backend gloo|nccl|rccl`): the collectives only."""

    pg_backend = "gloo"
    comm: TorchCommunicator  # device_facts is the process group's

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.comm = self.communicator(settings)
        self.rank = self.comm.rank
        self.runner = CollectiveRunner(self.comm, settings)
        self.name = self.comm.library

    def device_facts(self) -> dict[str, Any]:
        return self.comm.device_facts()

    @property
    def broken(self) -> str:
        """Why this rank's process group cannot go on ('' while it can)."""
        return self.comm.broken

    def communicator(self, settings: Settings) -> TorchCommunicator:
        return TorchCommunicator(self.pg_backend, settings)


class GlooBackend(TorchDistributedBackend):
    pg_backend = "gloo"


# Set to 1 to time torch.distributed's calls on NVIDIA GPUs even where nccl4py is installed.
NO_NCCL4PY_ENV = "DEEPBENCH_NO_NCCL4PY"


class NcclBackend(TorchDistributedBackend):
    """NCCL on NVIDIA, RCCL on ROCm (same process-group name in PyTorch). On NVIDIA, NCCL's own calls
    through nccl4py where it is installed (nccl4py_comm.py); torch.distributed's otherwise, and on
    ROCm (RCCL through the same torch code: unproven here, without an AMD GPU)."""

    pg_backend = "nccl"

    def communicator(self, settings: Settings) -> TorchCommunicator:
        why_not = nccl4py_unavailable() if not torch.version.hip else "ROCm: RCCL through torch.distributed"
        if os.environ.get(NO_NCCL4PY_ENV) == "1":
            why_not = f"{NO_NCCL4PY_ENV}=1"
        if why_not:
            comm = TorchCommunicator(self.pg_backend, settings)
            comm.fallback_reason = why_not
            return comm
        return Nccl4pyCommunicator(settings)
