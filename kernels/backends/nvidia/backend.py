"""The nvidia backend's class: the router (shared/router.py) over NVIDIA's own libraries, each operation on
the backend its declaration names (declaration.py), all of them on one run's GPU (the CUDA layer)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..contract.declaration import BackendDeclaration
from ..gpu.cuda.device import CudaDevice
from ..shared.router import RouterBackend
from .declaration import NVIDIA


class NvidiaBackend(RouterBackend):
    name = "nvidia"
    declaration: ClassVar[BackendDeclaration[Any]] = NVIDIA

    def shared(self) -> dict[str, Any]:
        """The run's GPU, which cuBLAS, cuDNN, cuSPARSE, cuSPARSELt and PyTorch all measure on."""
        return {"cuda": CudaDevice(self.settings)}

    @property
    def cuda(self) -> CudaDevice:
        """The run's GPU (tests set its measured ceilings)."""
        device = self.shares["cuda"]
        assert isinstance(device, CudaDevice)
        return device
