"""cuDNN operation graphs for one convolution direction, through cudnn-frontend's Python API.

Layouts are DeepBench's by default (`conv_bench.cu`: NCHW tensors and KCRS filters for float,
NHWC and KRSC for half and int8; declaration.deepbench_layout), or the one --layout names: the
graph's strides and the torch tensors bound to it say the same layout. Each graph holds
one operation (forward, backward-data or backward-filter), so each direction is one library
call, timed and checked on its own, as DeepBench timed them. The convolution is a
cross-correlation, as frameworks run it (DeepBench's descriptor said CUDNN_CONVOLUTION, the same
arithmetic with the filter read in reverse).

Data and compute types: fp32 computes in fp32 (engines that would down-convert to TF32 are
excluded, so "fp32" means fp32 arithmetic), tf32 allows TF32 tensor cores, fp16 and bf16 store
16-bit values and accumulate in fp32 (DeepBench's training rule), int8 multiplies int8 and
accumulates and writes int32 (DeepBench's server inference ran int8 in, int32 accumulate; its
INT8_CONFIG then rounded the output to int8, a step the graph API leaves to a separate
operation, so the output here is the accumulator itself)."""

from __future__ import annotations

from typing import Any

import torch

from ...catalog import ConvKernel
from ...precision import Precision
from .declaration import TYPES

DIRECTIONS = ("fwd", "bwd_data", "bwd_filter")
HEURISTICS = ("A", "B", "FALLBACK")  # cuDNN's heuristic modes asked for candidates, in order (search.py)
TORCH_DTYPES = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
    Precision.INT8: torch.int8,
}


# Directions each precision has in cuDNN: int8 convolutions are forward only (inference).
PRECISION_DIRECTIONS = {Precision.INT8: ("fwd",)}
INT8_FORWARD_ONLY = "forward only: cuDNN has no int8 backward convolution (DeepBench timed int8 inference forward)"


def strides(dims: tuple[int, int, int, int], channels_last: bool) -> list[int]:
    """Element strides of an (N, C, H, W) tensor in NCHW or NHWC memory."""
    _n, c, h, w = dims
    return [h * w * c, 1, w * c, c] if channels_last else [c * h * w, h * w, w, 1]


def tensor_for(dims: tuple[int, int, int, int], dtype: torch.dtype, channels_last: bool) -> torch.Tensor:
    """An uninitialised torch tensor of logical shape `dims` in the graph's memory layout."""
    t = torch.empty(dims, dtype=dtype, device="cuda")
    return t.contiguous(memory_format=torch.channels_last) if channels_last else t


def build(
    cudnn: Any, handle: Any, kk: ConvKernel, precision: Precision, direction: str, channels_last: bool
) -> tuple[Any, dict[str, Any]]:
    """The graph of one direction and its tensors by role (x, w, y: the direction's inputs and
    output under the names the forward pass gives them), in NHWC/KRSC memory where
    `channels_last`, else NCHW/KCRS; validated and lowered, not yet planned."""
    types = TYPES[precision]
    dt = cudnn.data_type
    # Inputs name their type; the graph's io type is the output's (int8 in, int32 out).
    g = cudnn.pygraph(
        io_data_type=getattr(dt, types.output),
        intermediate_data_type=dt.FLOAT,
        compute_data_type=getattr(dt, types.compute),
        handle=handle,
    )
    x_dims = (kk.n, kk.c, kk.h, kk.w)
    w_dims = (kk.k, kk.c, kk.r, kk.s)
    y_dims = (kk.n, kk.k, kk.out_h, kk.out_w)
    geometry = dict(padding=[kk.pad_h, kk.pad_w], stride=[kk.stride_h, kk.stride_w], dilation=[1, 1])
    cl = channels_last

    def tensor(name: str, dims: tuple[int, int, int, int]) -> Any:
        return g.tensor(name=name, dim=list(dims), stride=strides(dims, cl), data_type=getattr(dt, types.io))

    def output(t: Any, dims: tuple[int, int, int, int]) -> None:
        """Mark the direction's result an output, in the output type and the graph's layout."""
        t.set_output(True).set_data_type(getattr(dt, types.output)).set_dim(list(dims)).set_stride(strides(dims, cl))

    if direction == "fwd":
        x, w = tensor("X", x_dims), tensor("W", w_dims)
        y = g.conv_fprop(image=x, weight=w, **geometry)
        output(y, y_dims)
        roles = {"x": x, "w": w, "y": y}
    elif direction == "bwd_data":
        dy, w = tensor("DY", y_dims), tensor("W", w_dims)
        dx = g.conv_dgrad(loss=dy, filter=w, **geometry)
        output(dx, x_dims)
        roles = {"dy": dy, "w": w, "dx": dx}
    else:
        x, dy = tensor("X", x_dims), tensor("DY", y_dims)
        dw = g.conv_wgrad(image=x, loss=dy, **geometry)
        output(dw, w_dims)
        roles = {"x": x, "dy": dy, "dw": dw}
    g.validate()
    g.build_operation_graph()
    return g, roles
