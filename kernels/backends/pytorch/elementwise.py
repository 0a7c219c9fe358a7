"""Binary element-wise add and mul (ElementwiseKernel) through torch.add / torch.mul.

A smaller operand is laid out as the trailing dimension of the output, (elements / n, n) with the
operand (n,), so PyTorch broadcasts it over the leading rows, as a bias or RoPE's table is. The
result is written into a preallocated output (out=), so the time is the kernel's and not the
allocator's; the check recomputes it in float64."""

from __future__ import annotations

from typing import Callable

import torch

from ...layers import ElementwiseKernel
from ...precision import Precision
from ..base import Prepared, Unsupported
from .context import TorchContext
from .layer_common import forward_part, layer_dtype

OPS: dict[str, Callable[..., torch.Tensor]] = {"add": torch.add, "mul": torch.mul}


def layout(kernel: ElementwiseKernel) -> tuple[tuple[int, int], tuple[int, ...], tuple[int, ...]]:
    """Shapes of the output (rows, cols) and of a and b: cols is the smaller operand's size, an
    operand of the output's size is (rows, cols), the smaller one (cols,)."""
    cols = min(kernel.a_elements, kernel.b_elements)
    rows = kernel.elements // cols
    shapes = []
    for n in (kernel.a_elements, kernel.b_elements):
        if n not in (kernel.elements, cols) or max(kernel.a_elements, kernel.b_elements) != kernel.elements:
            raise Unsupported(f"operands of {kernel.a_elements} and {kernel.b_elements} elements broadcast to "
                              f"{kernel.elements} in a pattern this backend does not lay out (one operand must "
                              "be the output's size)")
        shapes.append((rows, cols) if n == kernel.elements else (cols,))
    return (rows, cols), shapes[0], shapes[1]


def prepare(ctx: TorchContext, kernel: ElementwiseKernel, precision: Precision) -> Prepared:
    dtype = layer_dtype(ctx, kernel, precision)
    out_shape, a_shape, b_shape = layout(kernel)
    a, b = ctx.random(a_shape, dtype), ctx.random(b_shape, dtype)
    out = torch.empty(out_shape, dtype=dtype, device=ctx.device)
    fn = OPS[kernel.function]

    def run() -> None:
        fn(a, b, out=out)

    def reference() -> torch.Tensor:
        return fn(a.double(), b.double())

    return forward_part(kernel, precision, run, lambda: out, reference, "reference-fp64",
                        info={"shapes": {"a": list(a.shape), "b": list(b.shape), "out": list(out.shape)}})
