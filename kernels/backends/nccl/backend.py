"""The nccl and rccl backends (`--backend nccl|rccl`): NCCL on NVIDIA, RCCL on ROCm (the same
process-group name in PyTorch). On NVIDIA GPUs NCCL's own calls through nccl4py where it loads
(nccl4py_comm.py), else torch.distributed's (collectives/torch_dist.py), named in the result."""

from __future__ import annotations

import os

import torch

from ...results import Settings
from ..collectives.torch_backend import TorchDistributedBackend
from ..collectives.torch_dist import TorchCommunicator
from .nccl4py_comm import Nccl4pyCommunicator, nccl4py_unavailable

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
