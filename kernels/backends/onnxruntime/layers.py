"""Layer benchmarks (kernels/layers.py) on onnxruntime, each as the ONNX operator an exported
model holds: MaxPool / AveragePool (GlobalAveragePool / GlobalMaxPool when the window is the
whole map), BatchNormalization (inference), LayerNormalization (opset 17), RMSNormalization
(opset 23), Softmax, Relu / Gelu (opset 20, approximate none or tanh) / Sigmoid / Tanh, SiLU as
Mul(x, Sigmoid(x)) (what exporters write; ONNX's Swish came in opset 24: onnxruntime's
optimizer fuses the pair into its one-pass QuickGelu kernel, seen in 1.31's optimized graph),
and Gather for an embedding; binary Add / Mul (broadcasting a smaller operand over the rows) and
MatMul over 3-D inputs for batched GEMM. Attention is attention.py.

Float32 only: the graphs are built in float32 (the CPU execution provider's half-precision
coverage differs per operator, and quantized layers are not implemented). Weights (scales,
statistics, the embedding table) are initializers, as in an inference model. Operators of an
opset newer than the installed onnx or onnxruntime knows are `unsupported` with that reason.
Every output is checked against the float64 references in kernels/reference/layers.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

from ...catalog import Kernel
from ...layers import (
    ActivationKernel,
    BatchedGemmKernel,
    BatchNormKernel,
    ElementwiseKernel,
    EmbeddingKernel,
    NormKernel,
    PoolingKernel,
    SoftmaxKernel,
)
from ...precision import Precision
from ...reference import layers as ref
from ...reference.numpy_checks import check_batched_matmul
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported, elementwise_layout
from .context import OrtContext
from .session import OPSET, BoundCall

GELU_OPSET = 20
RMS_NORM_OPSET = 23
# What onnxruntime raises when it has no kernel for an operator or opset (an older runtime).
LOAD_FAILURES = (ort_state.Fail, ort_state.NotImplemented, ort_state.InvalidGraph)
ONNX_ACTIVATIONS = {
    "relu": "Relu",
    "gelu": "Gelu",
    "gelu_tanh": "Gelu",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "silu": "Mul(x, Sigmoid(x))",
}


def require_fp32(kernel: Kernel, precision: Precision) -> None:
    if precision is not Precision.FP32:
        raise Unsupported(
            f"the onnxruntime backend builds its {kernel.op} graphs in float32 only; "
            f"{precision.value} is not run (quantized and half-precision layers are not implemented)"
        )


def bind(
    ctx: OrtContext,
    nodes: onnx.NodeProto | Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
    initializers: dict[str, np.ndarray],
    operator: str,
    opset: int = OPSET,
) -> BoundCall:
    """The bound session; an operator newer than the installed onnx or onnxruntime is unsupported."""
    if opset > OPSET:
        known = onnx.defs.onnx_opset_version()
        if known < opset:
            raise Unsupported(
                f"{operator} needs ONNX opset {opset} and the installed onnx {onnx.__version__} "
                f"knows opsets up to {known}"
            )
        try:
            return ctx.bound(nodes, inputs, outputs, initializers, opset)
        except LOAD_FAILURES as exc:
            first = str(exc).strip().splitlines()[0][:300]
            raise Unsupported(
                f"onnxruntime {ort.__version__} cannot run {operator} (ONNX opset {opset}) on the CPU "
                f"execution provider: {first}"
            ) from exc
    return ctx.bound(nodes, inputs, outputs, initializers)


def forward(
    kernel: Kernel, precision: Precision, call: BoundCall, check: Callable[[], Check], operator: str, **info: Any
) -> Prepared:
    part = TimedPart(
        "fwd",
        call,
        check,
        kernel.flops("fwd"),
        kernel.min_bytes("fwd", precision),
        capturable=False,
        info={"operator": operator, "providers": list(call.providers), **info},
    )
    return Prepared(parts=[part], info={"directions": ["fwd"]})


def prepare_pooling(ctx: OrtContext, kernel: PoolingKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    kk = kernel
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), precision)
    y = np.empty((kk.n, kk.c, kk.out_h, kk.out_w), dtype=np.float32)
    whole_map = (kk.r, kk.s) == (kk.h, kk.w) and kk.pad_h == kk.pad_w == 0
    if whole_map:
        operator = "GlobalMaxPool" if kk.mode == "max" else "GlobalAveragePool"
        node = helper.make_node(operator, ["x"], ["y"])
    else:
        operator = "MaxPool" if kk.mode == "max" else "AveragePool"
        attrs: dict[str, Any] = {"count_include_pad": 1} if kk.mode == "avg" else {}
        node = helper.make_node(
            operator,
            ["x"],
            ["y"],
            kernel_shape=[kk.r, kk.s],
            strides=[kk.stride_h, kk.stride_w],
            pads=[kk.pad_h, kk.pad_w, kk.pad_h, kk.pad_w],
            ceil_mode=0,
            **attrs,
        )
    call = bind(ctx, node, {"x": x}, {"y": y}, {}, operator)
    images = ref.check_images(kk.n)

    def check() -> Check:
        expect = ref.pool_nchw(
            x[images], kk.mode, kk.r, kk.s, kk.pad_h, kk.pad_w, kk.stride_h, kk.stride_w, kk.out_h, kk.out_w
        )
        return ref.compare(y[images], expect, precision, f"images {images} against their windows")

    return forward(kk, precision, call, check, operator)


def prepare_batch_norm(ctx: OrtContext, kernel: BatchNormKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    kk = kernel
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), precision)
    weight, bias, mean = (ctx.random((kk.c,), precision) for _ in range(3))
    var = ctx.rng.random(kk.c, dtype=np.float32) + np.float32(ref.VAR_FLOOR)
    y = np.empty_like(x)
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], epsilon=ref.EPS)
    call = bind(
        ctx, node, {"x": x}, {"y": y}, {"scale": weight, "bias": bias, "mean": mean, "var": var}, "BatchNormalization"
    )
    return forward(
        kk,
        precision,
        call,
        lambda: ref.compare(y, ref.batch_norm_nchw(x, mean, var, weight, bias), precision),
        "BatchNormalization",
        statistics="running (inference), initializers",
    )


def prepare_norm(ctx: OrtContext, kernel: NormKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    kk = kernel
    x = ctx.random((kk.rows, kk.cols), precision)
    weight, bias = ctx.random((kk.cols,), precision), ctx.random((kk.cols,), precision)
    y = np.empty_like(x)
    if kk.kind == "layer":
        operator, opset = "LayerNormalization", OPSET
        node = helper.make_node(operator, ["x", "scale", "bias"], ["y"], axis=-1, epsilon=ref.EPS)
        consts = {"scale": weight, "bias": bias}
        reference = lambda: ref.layer_norm(x, weight, bias)  # noqa: E731
    else:
        operator, opset = "RMSNormalization", RMS_NORM_OPSET
        node = helper.make_node(operator, ["x", "scale"], ["y"], axis=-1, epsilon=ref.EPS)
        consts = {"scale": weight}
        reference = lambda: ref.rms_norm(x, weight)  # noqa: E731
    call = bind(ctx, node, {"x": x}, {"y": y}, consts, operator, opset)
    return forward(kk, precision, call, lambda: ref.compare(y, reference(), precision), operator, opset=opset)


def prepare_softmax(ctx: OrtContext, kernel: SoftmaxKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    x = ctx.random((kernel.rows, kernel.cols), precision)
    y = np.empty_like(x)
    call = bind(ctx, helper.make_node("Softmax", ["x"], ["y"], axis=-1), {"x": x}, {"y": y}, {}, "Softmax")
    return forward(kernel, precision, call, lambda: ref.compare(y, ref.softmax(x), precision), "Softmax")


def prepare_activation(ctx: OrtContext, kernel: ActivationKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    fn = kernel.function
    x = ctx.random((kernel.elements,), precision)
    y = np.empty_like(x)
    operator, opset = ONNX_ACTIVATIONS[fn], OPSET
    if fn == "silu":
        nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    elif fn in ("gelu", "gelu_tanh"):
        opset = GELU_OPSET
        nodes = [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh" if fn == "gelu_tanh" else "none")]
    else:
        nodes = [helper.make_node(operator, ["x"], ["y"])]
    call = bind(ctx, nodes, {"x": x}, {"y": y}, {}, operator, opset)
    return forward(
        kernel, precision, call, lambda: ref.check_activation(fn, y, x, precision, ctx.rng), operator, opset=opset
    )


def prepare_embedding(ctx: OrtContext, kernel: EmbeddingKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    table = ctx.random((kernel.vocab, kernel.dim), precision)
    ids = ctx.rng.integers(0, kernel.vocab, size=kernel.lookups, dtype=np.int64)
    y = np.empty((kernel.lookups, kernel.dim), dtype=np.float32)
    call = bind(
        ctx,
        helper.make_node("Gather", ["table", "ids"], ["y"], axis=0),
        {"ids": ids},
        {"y": y},
        {"table": table},
        "Gather",
    )
    return forward(
        kernel,
        precision,
        call,
        lambda: ref.compare(y, table.astype(np.float64)[ids], precision),
        "Gather",
        table="initializer (constant)",
        indices="int64",
    )


ONNX_ELEMENTWISE = {"add": "Add", "mul": "Mul"}


def prepare_elementwise(ctx: OrtContext, kernel: ElementwiseKernel, precision: Precision) -> Prepared:
    """Add / Mul with ONNX's (numpy's) broadcasting: a smaller operand (cols,) over the rows."""
    require_fp32(kernel, precision)
    out_shape, a_shape, b_shape = elementwise_layout(kernel)
    a, b = ctx.random(a_shape, precision), ctx.random(b_shape, precision)
    y = np.empty(out_shape, dtype=np.float32)
    operator = ONNX_ELEMENTWISE[kernel.function]
    call = bind(ctx, helper.make_node(operator, ["a", "b"], ["y"]), {"a": a, "b": b}, {"y": y}, {}, operator)
    return forward(
        kernel,
        precision,
        call,
        lambda: ref.compare(y, ref.elementwise(kernel.function, a, b), precision),
        operator,
        shapes={"a": list(a_shape), "b": list(b_shape), "out": list(out_shape)},
    )


def prepare_batched_gemm(ctx: OrtContext, kernel: BatchedGemmKernel, precision: Precision) -> Prepared:
    """MatMul over 3-D inputs, each entry laid out as gemm.py lays out one GEMM (out[i] (n x m) =
    X[i] @ Y[i], DeepBench's column-major C); both operands are graph inputs, as attention's are.
    The check compares the first and the last entry with a float64 product."""
    require_fp32(kernel, precision)
    b, m, n, k = kernel.batch, kernel.m, kernel.n, kernel.k
    x, w = ctx.random((b, n, k), precision), ctx.random((b, k, m), precision, scale=k**-0.5)
    y = np.empty((b, n, m), dtype=np.float32)
    call = bind(ctx, helper.make_node("MatMul", ["x", "w"], ["y"]), {"x": x, "w": w}, {"y": y}, {}, "MatMul")
    return forward(
        kernel,
        precision,
        call,
        lambda: check_batched_matmul(y, x, w, precision, ctx.rng),
        "MatMul",
        operands="graph inputs (3-D, batch-major)",
    )
