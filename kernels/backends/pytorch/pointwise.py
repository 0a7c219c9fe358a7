"""Softmax over the last dimension and element-wise activations, checked against their
formulas in float64 (written out here, not the library's functions)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ...layers import ActivationKernel, SoftmaxKernel
from ...precision import Precision
from ..contract.base import Prepared
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, layer_dtype

GELU_TANH_COEFF = 0.044715

FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}


def _sigmoid64(x: torch.Tensor) -> torch.Tensor:
    return 1.0 / (1.0 + torch.exp(-x))


REFERENCES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "gelu": lambda x: 0.5 * x * (1.0 + torch.special.erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: (
        0.5 * x * (1.0 + 2.0 * _sigmoid64(2.0 * math.sqrt(2.0 / math.pi) * (x + GELU_TANH_COEFF * x**3)) - 1.0)
    ),
    "silu": lambda x: x * _sigmoid64(x),
    "tanh": lambda x: 2.0 * _sigmoid64(2.0 * x) - 1.0,
    "sigmoid": _sigmoid64,
}
assert set(FUNCTIONS) == set(REFERENCES)


def prepare_softmax(ctx: TorchContext, kernel: SoftmaxKernel, precision: Precision) -> Prepared:
    x = ctx.random((kernel.rows, kernel.cols), layer_dtype(ctx, kernel, precision))
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = torch.softmax(x, dim=-1)

    def reference() -> torch.Tensor:
        e = torch.exp(x.double() - x.double().amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    return forward_part(kernel, precision, run, lambda: out["y"], reference, "reference-fp64")


def prepare_activation(ctx: TorchContext, kernel: ActivationKernel, precision: Precision) -> Prepared:
    x = ctx.random((kernel.elements,), layer_dtype(ctx, kernel, precision))
    fn, ref = FUNCTIONS[kernel.function], REFERENCES[kernel.function]
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = fn(x)

    return forward_part(kernel, precision, run, lambda: out["y"], lambda: ref(x.double()), "reference-fp64")
