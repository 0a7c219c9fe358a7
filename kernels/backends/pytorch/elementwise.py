"""Binary element-wise add and mul (ElementwiseKernel) through torch.add / torch.mul.

A smaller operand is laid out as the trailing dimension of the output, (elements / n, n) with the
operand (n,), so PyTorch broadcasts it over the leading rows, as a bias or RoPE's table is. The
result is written into a preallocated output (out=), so the time is the kernel's and not the
allocator's; the check recomputes it in float64 (kernels/reference/layers.py)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...layers import ElementwiseKernel
from ...precision import Precision
from ...reference import layers as ref
from ..contract.base import Prepared, elementwise_layout
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, host64, layer_dtype

OPS: dict[str, Callable[..., torch.Tensor]] = {"add": torch.add, "mul": torch.mul}


def prepare(ctx: TorchContext, kernel: ElementwiseKernel, precision: Precision) -> Prepared:
    dtype = layer_dtype(ctx, kernel, precision)
    out_shape, a_shape, b_shape = elementwise_layout(kernel)
    a, b = ctx.random(a_shape, dtype), ctx.random(b_shape, dtype)
    out = torch.empty(out_shape, dtype=dtype, device=ctx.device)
    fn = OPS[kernel.function]

    def run() -> None:
        fn(a, b, out=out)

    return forward_part(
        kernel,
        precision,
        run,
        lambda: out,
        lambda: ref.elementwise(kernel.function, host64(a), host64(b)),
        ref.METHOD,
        info={"shapes": {"a": list(a.shape), "b": list(b.shape), "out": list(out.shape)}},
    )
