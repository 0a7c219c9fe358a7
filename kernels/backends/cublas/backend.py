"""The cublas backend's class; what it declares (its precisions, with the library's types for each) is
in declaration.py, importable without the library."""

from __future__ import annotations

from ...catalog import Kernel
from ...precision import Precision
from ...results import Settings
from ..contract.base import Prepared
from ..gpu.cuda.device import CudaDevice
from ..gpu.cuda.native import NativeCudaBackend, binding_versions
from . import gemm


class CublasBackend(NativeCudaBackend):
    name = "cublas"
    binding = ("nvmath.bindings.cublas", "nvmath-python")
    operations = ("gemm",)

    def __init__(self, settings: Settings, cuda: CudaDevice | None = None) -> None:
        super().__init__(settings, cuda)
        self._handles: dict[tuple[str, ...], gemm.Handle] = {}

    def prepare_op(self, kernel: Kernel, precision: Precision) -> Prepared:
        return gemm.prepare(self, kernel, precision)  # type: ignore[arg-type]

    def library_versions(self) -> dict[str, str]:
        versions = super().library_versions()
        versions.update(binding_versions())
        return versions

    def handle(self, math_flags: tuple[str, ...]) -> gemm.Handle:
        """The cuBLAS handle of one math mode (declaration.py MATH_MODES) for the backend's life,
        made on first use: a handle per mode rather than a mode set per call, so that a call
        captured in a CUDA graph runs with the mode it was prepared with."""
        if math_flags not in self._handles:
            self._handles[math_flags] = gemm.Handle(self.lib, math_flags)
        return self._handles[math_flags]
