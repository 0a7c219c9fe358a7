"""The cublas backend's class; what it declares (its precisions, with the library's types for each) is
in declaration.py, importable without the library."""

from __future__ import annotations

from typing import Any

from ...catalog import Kernel
from ...precision import Precision
from ..base import Prepared
from ..native import NativeCudaBackend, binding_versions
from . import gemm


class CublasBackend(NativeCudaBackend):
    name = "cublas"
    binding = ("nvmath.bindings.cublas", "nvmath-python")
    operations = ("gemm",)

    def prepare_op(self, kernel: Kernel, precision: Precision) -> Prepared:
        return gemm.prepare(self, kernel, precision)  # type: ignore[arg-type]

    def library_versions(self) -> dict[str, str]:
        versions = super().library_versions()
        versions.update(binding_versions())
        return versions

    @property
    def handle(self) -> Any:
        """One cuBLAS handle for the backend's life, made on first use."""
        if getattr(self, "_handle", None) is None:
            self._handle = gemm.Handle(self.lib)
        return self._handle
