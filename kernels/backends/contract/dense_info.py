"""The typed `info` of a sparse GEMM's dense twin (dense_beside.py for cuSPARSE and cuSPARSELt; the
PyTorch and TFLite sparse GEMMs time theirs the same way): the dense GEMM's time, and the speed-up
over it that the harness's `finish` derives. Light (pydantic only), so that the harness and the
reports read it without loading the backends that write it; the JSON keeps the keys."""

from __future__ import annotations

from ...results import Check, TimeStats
from .declaration import PartInfo


class DenseTwinInfo(PartInfo):
    """A sparse result's dense twin: its time (absent where the dense GEMM could not run)."""

    dense_time_us: TimeStats | None = None
    dense_tflops: float | None = None
    dense_check: Check | None = None
    speedup_vs_dense: float | None = None

    def speedup(self, sparse_median_us: float) -> float | None:
        """The dense median over the sparse one (None without a dense time)."""
        return None if self.dense_time_us is None else self.dense_time_us.median / sparse_median_us
