"""Correctness checks on torch tensors, in float64 on the tensors' own device: the checks of the
PyTorch backend and of every native backend that hands back torch tensors (cuBLAS, cuSPARSE,
cuSPARSELt), kept apart from all of them so that none checks itself (kernels/reference/__init__.py).

The error is ||out - ref||_F / ||ref||_F; NaN or Inf anywhere fails. Large GEMMs use Freivalds'
randomized check (out @ r against A @ (B @ r) for a few random vectors), which costs O(n^2)
instead of O(n^3) and catches any wrong block with high probability."""

from __future__ import annotations

import math

import torch

from ..precision import Precision, tolerance
from ..results import Check
from .verdicts import FREIVALDS_VECTORS, REFERENCE_MAX_MACS, integer_verdict, verdict


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out64, ref64 = out.detach().to(torch.float64), ref.detach().to(torch.float64)
    if not bool(torch.isfinite(out64).all()):
        return math.nan
    denom = torch.linalg.vector_norm(ref64).item()
    num = torch.linalg.vector_norm(out64 - ref64).item()
    return num / denom if denom > 0 else num


def check_matmul(
    out: torch.Tensor, x: torch.Tensor, y: torch.Tensor, precision: Precision, generator: torch.Generator | None = None
) -> Check:
    """out should equal x @ y (any layouts). Integer results must match exactly."""
    n, k = x.shape
    m = y.shape[1]
    if precision is Precision.INT8:
        if n * k * m <= REFERENCE_MAX_MACS:
            ref = x.to(torch.int64) @ y.to(torch.int64) if x.device.type == "cpu" else (x.double() @ y.double())
            wrong = int((out.to(torch.int64) != ref.to(torch.int64)).sum().item())
            return integer_verdict(wrong, "exact-int", f"{wrong} wrong elements")
        r = torch.randint(-2, 3, (m, FREIVALDS_VECTORS), device=x.device, generator=generator).double()
        lhs, rhs = out.double() @ r, x.double() @ (y.double() @ r)
        wrong = int((lhs != rhs).sum().item())
        return integer_verdict(wrong, "freivalds-exact")
    tol = tolerance(precision, reduction=k)
    if n * k * m <= REFERENCE_MAX_MACS:
        return verdict(relative_error(out, x.double() @ y.double()), precision, "reference-fp64", tol=tol)
    r = torch.randn(m, FREIVALDS_VECTORS, device=x.device, dtype=torch.float64, generator=generator)
    return verdict(relative_error(out.double() @ r, x.double() @ (y.double() @ r)), precision, "freivalds", tol=tol)
