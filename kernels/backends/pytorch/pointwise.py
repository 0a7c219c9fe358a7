"""Softmax over the last dimension and element-wise activations, checked against their float64
formulas in the reference layer (kernels/reference/layers.py: written out, not the library's functions)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ...layers import ActivationKernel, SoftmaxKernel
from ...precision import Precision
from ...reference import layers as ref
from ...results import Check
from ..contract.base import Prepared, TimedPart
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, host64, layer_dtype

FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}
assert set(FUNCTIONS) == set(ref.ACTIVATIONS)


def prepare_softmax(ctx: TorchContext, kernel: SoftmaxKernel, precision: Precision) -> Prepared:
    x = ctx.random((kernel.rows, kernel.cols), layer_dtype(ctx, kernel, precision))
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = torch.softmax(x, dim=-1)

    return forward_part(kernel, precision, run, lambda: out["y"], lambda: ref.softmax(host64(x)), ref.METHOD)


def prepare_activation(ctx: TorchContext, kernel: ActivationKernel, precision: Precision) -> Prepared:
    x = ctx.random((kernel.elements,), layer_dtype(ctx, kernel, precision))
    fn = FUNCTIONS[kernel.function]
    out: dict[str, torch.Tensor] = {}
    rng = np.random.default_rng(ctx.seed)

    def run() -> None:
        out["y"] = fn(x)

    def check() -> Check:  # every element, or CHECK_ELEMENTS random ones of a large tensor (reference/layers.py)
        return ref.check_activation(kernel.function, host64(out["y"]), host64(x), precision, rng)

    part = TimedPart("fwd", run, check, kernel.flops("fwd"), kernel.min_bytes("fwd", precision))
    return Prepared(parts=[part])
