"""How a check turns what it found into a verdict, the same for torch tensors (torch_checks.py) and
numpy arrays (numpy_checks.py): one rule for every backend, in a module that imports neither library
(a CPU board's runtimes run without PyTorch)."""

from __future__ import annotations

import math

from ..precision import Precision, tolerance
from ..results import Check

FREIVALDS_VECTORS = 4
# Above this many multiply-adds a float64 reference GEMM is replaced by Freivalds' check.
REFERENCE_MAX_MACS = 1 << 31


def verdict(error: float, precision: Precision, method: str, detail: str = "", tol: float | None = None) -> Check:
    """Pass when finite and within `tol` (default: the precision's floor, precision.tolerance())."""
    tol = tolerance(precision) if tol is None else tol
    passed = math.isfinite(error) and error <= tol
    return Check(
        passed=passed,
        method=method,
        error=error if math.isfinite(error) else None,
        tolerance=tol,
        detail=detail if math.isfinite(error) else (detail + " non-finite output").strip(),
    )


def integer_verdict(wrong: int, method: str, detail: str = "") -> Check:
    """An integer result, which must match exactly: `wrong` elements differ from the reference."""
    return Check(passed=wrong == 0, method=method, error=float(wrong), tolerance=0.0, detail=detail)
