"""The cusparselt backend's class; what it declares (its precisions, with the library's types for each) is
in declaration.py, importable without the library."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ...catalog import Kernel, Sparse24GemmKernel
from ...precision import Precision
from ..contract.base import Prepared
from ..gpu.cuda.native import NativeCudaBackend, binding_versions
from ..shared.dense_beside import DenseBeside
from . import structured


class CusparseLtBackend(NativeCudaBackend):
    name = "cusparselt"
    binding = ("nvmath.bindings.cusparseLt", "nvmath-python")
    operations = ("sparse24_gemm",)

    def covers(self, kernel: Kernel, precision: Precision) -> bool:
        return super().covers(kernel, precision) and precision in structured.TYPES

    def prepare_op(self, kernel: Kernel, precision: Precision) -> Prepared:
        assert isinstance(kernel, Sparse24GemmKernel)
        prepared = structured.prepare(self, kernel, precision)
        prepared.after = lambda backend, rule: self.dense_beside.measure(
            kernel, precision, rule, structured.DENSE_LAYOUT
        )
        return prepared

    @cached_property
    def dense_beside(self) -> DenseBeside:
        return DenseBeside(self.name, self.settings, cuda=self.cuda)

    def library_versions(self) -> dict[str, str]:
        versions = super().library_versions()
        if self.lib is not None:
            versions.update(binding_versions())
            try:
                versions["cuSPARSELt"] = structured.library_version(self.lib)
            except Exception as exc:  # noqa: BLE001 - no GPU or no library: the versions say why
                versions["cuSPARSELt"] = f"unknown ({type(exc).__name__}: {exc})"
        return versions

    @property
    def handle(self) -> Any:
        """One cuSPARSELt handle for the backend's life, made on first use."""
        if getattr(self, "_handle", None) is None:
            self._handle = structured.Handle(self.lib)
        return self._handle
