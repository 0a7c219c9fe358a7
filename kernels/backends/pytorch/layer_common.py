"""What the layer benchmarks (pooling, norms, softmax, activations, embedding, attention) share:
the precisions they run in and their one forward part, checked against a float64 reference from the
reference layer (kernels/reference/layers.py: each layer from its definition, not by the library call
under test), the same one the onnxruntime and tflite backends are checked against."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ...catalog import Kernel
from ...precision import Precision
from ...reference.layers import compare
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from ..shared.torch_context import TorchContext

FLOAT_PRECISIONS = (Precision.FP32, Precision.FP16, Precision.BF16)


def layer_dtype(ctx: TorchContext, kernel: Kernel, precision: Precision, matmul: bool = False) -> torch.dtype:
    if precision is Precision.TF32 and matmul and ctx.is_cuda:
        return torch.float32
    if precision not in FLOAT_PRECISIONS:
        why = (
            "tf32 is a matrix-unit mode of NVIDIA GPUs and this layer has no matrix work here"
            if precision is Precision.TF32
            else f"the torch backend has no {precision.value} {kernel.op} (quantized layers are not implemented)"
        )
        raise Unsupported(f"{why}; it runs this layer in fp32, fp16 or bf16")
    return ctx.dtype(precision)


def host64(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a float64 numpy array on the host (what the reference layer computes on)."""
    return t.detach().to(torch.float64).cpu().numpy()


def forward_part(
    kernel: Kernel,
    precision: Precision,
    run: Callable[[], None],
    result: Callable[[], torch.Tensor],
    reference: Callable[[], np.ndarray],
    method: str,
    detail: str = "",
    info: dict | None = None,
) -> Prepared:
    """One timed forward part; its check compares the last output with the float64 reference."""

    def check() -> Check:
        return compare(host64(result()), reference(), precision, detail, method)

    part = TimedPart("fwd", run, check, kernel.flops("fwd"), kernel.min_bytes("fwd", precision), info=dict(info or {}))
    return Prepared(parts=[part])
