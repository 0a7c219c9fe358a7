"""The cusparse backend's class; what it declares (its precisions, with the library's types for each) is
in declaration.py, importable without the library."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ...catalog import Kernel, SparseGemmKernel
from ...precision import Precision
from ..contract.base import Prepared
from ..gpu.cuda.native import NativeCudaBackend
from ..shared.dense_beside import DenseBeside
from . import spmm


class CusparseBackend(NativeCudaBackend):
    name = "cusparse"
    binding = ("nvmath.bindings.cusparse", "nvmath-python")
    operations = ("sparse_gemm",)

    def covers(self, kernel: Kernel, precision: Precision) -> bool:
        return super().covers(kernel, precision) and precision in spmm.TYPES

    def prepare_op(self, kernel: Kernel, precision: Precision) -> Prepared:
        assert isinstance(kernel, SparseGemmKernel)
        prepared = spmm.prepare(self, kernel, precision)
        prepared.after = lambda backend, rule: self.dense_beside.measure(kernel, precision, rule)
        return prepared

    @cached_property
    def dense_beside(self) -> DenseBeside:
        return DenseBeside(self.name, self.settings, cuda=self.cuda)

    @property
    def handle(self) -> Any:
        if getattr(self, "_handle", None) is None:
            self._handle = spmm.Handle(self.lib)
        return self._handle
