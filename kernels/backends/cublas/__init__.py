"""cuBLAS called directly, through nvmath-python's bindings: DeepBench's own GEMM call.

DeepBench's `gemm_bench` calls `cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, lda, B,
ldb, beta, C, ldc, compute type, algo)` on column-major operands. This backend makes that very
call (`nvmath.bindings.cublas.gemm_ex`), with DeepBench's padding (kernels/padding.py), so the
library receives DeepBench's problem in every precision, int8 at any n included (PyTorch's
`torch._int_mm` needs n > 16 and pads it: another kernel). fp8 goes through cuBLASLt, the only
cuBLAS API that has it (gemm.py says which layouts it accepts)."""

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

    def default_precisions(self, kernel: Kernel) -> list[Precision]:
        return [Precision.FP32, Precision.FP16]

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
