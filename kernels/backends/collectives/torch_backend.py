"""torch.distributed as a backend of its own: the base of the gloo and nccl backends (gloo/, nccl/),
each of which says which communicator it makes."""

from __future__ import annotations

from typing import Any

import torch

from ...results import Settings
from .common import CollectiveBackend, CollectiveRunner
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
