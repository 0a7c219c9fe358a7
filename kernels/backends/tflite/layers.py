"""Layer benchmarks (kernels/layers.py) on TFLite, one builtin operator per model as for the
other ops: MAX_POOL_2D / AVERAGE_POOL_2D (NHWC), SOFTMAX, RELU / LOGISTIC / TANH / GELU
(approximate or exact erf), GATHER (axis 0) for an embedding, ADD / MUL (a smaller operand broadcast
over the rows) and BATCH_MATMUL for batched GEMM, float32.

What TFLite has no single builtin operator for is `unsupported` with that reason: batch
normalization (the TensorFlow Lite converter folds it into the preceding convolution or writes
MUL and ADD), layer and RMS normalization and attention (the converter decomposes them into
MEAN, SQUARED_DIFFERENCE, RSQRT, BATCH_MATMUL, SOFTMAX...), and SiLU (LOGISTIC then MUL).
TFLite pools pad only SAME or VALID, and its AVERAGE_POOL_2D divides by the cells inside the
image, so an average pool that counts padding (the kernels' count_include_pad) is unsupported.
Checked against the float64 references in kernels/reference/layers.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...catalog import Kernel
from ...layers import (
    ActivationKernel,
    BatchedGemmKernel,
    ElementwiseKernel,
    EmbeddingKernel,
    PoolingKernel,
    SoftmaxKernel,
)
from ...precision import Precision
from ...reference import layers as ref
from ...reference.numpy_checks import check_batched_matmul
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported, elementwise_layout
from .context import LoadedModel, TfliteContext
from .conv import tflite_padding
from .flatbuffer import ModelSpec, OpSpec, TensorSpec
from .flatbuffer import schema as S

SINGLE_OPERATOR = "this backend times single-operator models"
NO_BUILTIN = {
    "batch_norm": "TFLite has no batch normalization operator: the TensorFlow Lite converter folds it into the "
    "preceding convolution or writes MUL and ADD",
    "norm": "TFLite has no layer or RMS normalization operator: the TensorFlow Lite converter decomposes it into "
    "reductions and element-wise operators (MEAN, SQUARED_DIFFERENCE, RSQRT, MUL, ...)",
    "attention": "TFLite has no attention operator: the TensorFlow Lite converter decomposes it into BATCH_MATMUL, "
    "SOFTMAX and element-wise operators",
}
ACTIVATIONS = {
    "relu": S.BuiltinOperator.RELU,
    "sigmoid": S.BuiltinOperator.LOGISTIC,
    "tanh": S.BuiltinOperator.TANH,
    "gelu": S.BuiltinOperator.GELU,
    "gelu_tanh": S.BuiltinOperator.GELU,
}
OPERATOR_NAMES = {
    S.BuiltinOperator.RELU: "RELU",
    S.BuiltinOperator.LOGISTIC: "LOGISTIC",
    S.BuiltinOperator.TANH: "TANH",
    S.BuiltinOperator.GELU: "GELU",
}


def no_builtin(ctx: TfliteContext, kernel: Kernel, precision: Precision) -> Prepared:
    raise Unsupported(f"{NO_BUILTIN[kernel.op]}; {SINGLE_OPERATOR}")


def require_fp32(kernel: Kernel, precision: Precision) -> None:
    if precision is not Precision.FP32:
        raise Unsupported(
            f"the tflite backend runs its {kernel.op} models in float32 only; {precision.value} is not "
            "run (quantized layers are not implemented)"
        )


def unary(ctx: TfliteContext, x: np.ndarray, out_shape: tuple[int, ...], op: OpSpec) -> LoadedModel:
    """A model y = op(x) with x the one input, set once."""
    tensors = [TensorSpec("x", x.shape, np.float32), TensorSpec("y", out_shape, np.float32)]
    model = ctx.interpreter(ModelSpec(tensors=tensors, op=op, inputs=[0], outputs=[1]))
    model.set_inputs(x)
    return model


def forward(
    kernel: Kernel, precision: Precision, model: LoadedModel, check: Callable[[], Check], operator: str, **info: Any
) -> Prepared:
    info = {**model.info(operator), "weights": "none", **info}  # an embedding table says it is a constant
    part = TimedPart(
        "fwd", model.invoke, check, kernel.flops("fwd"), kernel.min_bytes("fwd", precision), info=info, capturable=False
    )
    return Prepared(parts=[part], info={"directions": ["fwd"]})


def prepare_pooling(ctx: TfliteContext, kernel: PoolingKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    kk = kernel
    ph = tflite_padding(kk.h, kk.r, kk.stride_h, kk.pad_h, kk.out_h)
    pw = tflite_padding(kk.w, kk.s, kk.stride_w, kk.pad_w, kk.out_w)
    if ph is None or pw is None or ph != pw:
        raise Unsupported(
            f"TFLite pools pad only SAME or VALID; padding {kk.pad_h}x{kk.pad_w} with stride "
            f"{kk.stride_h}x{kk.stride_w} on {kk.h}x{kk.w} is neither "
            "(the converter adds a PAD operator)"
        )
    if kk.mode == "avg" and (kk.pad_h or kk.pad_w):
        raise Unsupported(
            "TFLite's AVERAGE_POOL_2D divides by the cells inside the image and this kernel counts "
            "the padding (count_include_pad)"
        )
    operator = "MAX_POOL_2D" if kk.mode == "max" else "AVERAGE_POOL_2D"
    builtin = S.BuiltinOperator.MAX_POOL_2D if kk.mode == "max" else S.BuiltinOperator.AVERAGE_POOL_2D
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), precision)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    options = S.Pool2DOptionsT(
        padding=ph, strideW=kk.stride_w, strideH=kk.stride_h, filterWidth=kk.s, filterHeight=kk.r
    )
    op = OpSpec(builtin, [0], [1], options)
    model = unary(ctx, x_nhwc, (kk.n, kk.out_h, kk.out_w, kk.c), op)
    images = ref.check_images(kk.n)

    def check() -> Check:
        y = model.output().transpose(0, 3, 1, 2)[images]  # NHWC -> NCHW
        expect = ref.pool_nchw(
            x[images], kk.mode, kk.r, kk.s, kk.pad_h, kk.pad_w, kk.stride_h, kk.stride_w, kk.out_h, kk.out_w
        )
        return ref.compare(y, expect, precision, f"images {images} against their windows")

    return forward(
        kk, precision, model, check, operator, layout="NHWC", padding="SAME" if ph == S.Padding.SAME else "VALID"
    )


def prepare_softmax(ctx: TfliteContext, kernel: SoftmaxKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    x = ctx.random((kernel.rows, kernel.cols), precision)
    op = OpSpec(S.BuiltinOperator.SOFTMAX, [0], [1], S.SoftmaxOptionsT(beta=1.0))
    model = unary(ctx, x, x.shape, op)
    return forward(kernel, precision, model, lambda: ref.compare(model.output(), ref.softmax(x), precision), "SOFTMAX")


def prepare_activation(ctx: TfliteContext, kernel: ActivationKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    fn = kernel.function
    if fn not in ACTIVATIONS:
        raise Unsupported(
            f"TFLite has no {fn} operator: the TensorFlow Lite converter writes LOGISTIC then MUL; {SINGLE_OPERATOR}"
        )
    builtin = ACTIVATIONS[fn]
    gelu = S.GeluOptionsT(approximate=fn == "gelu_tanh") if builtin == S.BuiltinOperator.GELU else None
    op = OpSpec(builtin, [0], [1], gelu)
    x = ctx.random((kernel.elements,), precision)
    model = unary(ctx, x, x.shape, op)
    return forward(
        kernel,
        precision,
        model,
        lambda: ref.check_activation(fn, model.output(), x, precision, ctx.rng),
        OPERATOR_NAMES[builtin],
        **({"approximate": fn == "gelu_tanh"} if fn.startswith("gelu") else {}),
    )


def prepare_embedding(ctx: TfliteContext, kernel: EmbeddingKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    table = ctx.random((kernel.vocab, kernel.dim), precision)
    ids = ctx.rng.integers(0, kernel.vocab, size=kernel.lookups).astype(np.int32)
    tensors = [
        TensorSpec("table", table.shape, np.float32, data=table),
        TensorSpec("ids", ids.shape, np.int32),
        TensorSpec("y", (kernel.lookups, kernel.dim), np.float32),
    ]
    op = OpSpec(S.BuiltinOperator.GATHER, [0, 1], [2], S.GatherOptionsT(axis=0, batchDims=0))
    model = ctx.interpreter(ModelSpec(tensors=tensors, op=op, inputs=[1], outputs=[2]))
    model.set_inputs(ids)
    return forward(
        kernel,
        precision,
        model,
        lambda: ref.compare(model.output(), table.astype(np.float64)[ids], precision),
        "GATHER",
        weights="table: constant in the model",
        indices="int32",
    )


ELEMENTWISE = {
    "add": (S.BuiltinOperator.ADD, S.AddOptionsT, "ADD"),
    "mul": (S.BuiltinOperator.MUL, S.MulOptionsT, "MUL"),
}


def prepare_elementwise(ctx: TfliteContext, kernel: ElementwiseKernel, precision: Precision) -> Prepared:
    """ADD / MUL of two model inputs; TFLite broadcasts a smaller operand (cols,) over the rows."""
    require_fp32(kernel, precision)
    out_shape, a_shape, b_shape = elementwise_layout(kernel)
    a, b = ctx.random(a_shape, precision), ctx.random(b_shape, precision)
    builtin, options, name = ELEMENTWISE[kernel.function]
    tensors = [
        TensorSpec("a", a_shape, np.float32),
        TensorSpec("b", b_shape, np.float32),
        TensorSpec("y", out_shape, np.float32),
    ]
    op = OpSpec(builtin, [0, 1], [2], options(fusedActivationFunction=S.ActivationFunctionType.NONE))
    model = ctx.interpreter(ModelSpec(tensors=tensors, op=op, inputs=[0, 1], outputs=[2]))
    model.set_inputs(a, b)
    want = ref.elementwise(kernel.function, a, b)
    return forward(
        kernel,
        precision,
        model,
        lambda: ref.compare(model.output(), want, precision),
        name,
        shapes={"a": list(a_shape), "b": list(b_shape), "out": list(out_shape)},
    )


def prepare_batched_gemm(ctx: TfliteContext, kernel: BatchedGemmKernel, precision: Precision) -> Prepared:
    """BATCH_MATMUL of two model inputs, each entry laid out as gemm.py lays out one GEMM (out[i]
    (n x m) = X[i] @ Y[i], DeepBench's column-major C); the first and last entries are checked."""
    require_fp32(kernel, precision)
    bt, m, n, k = kernel.batch, kernel.m, kernel.n, kernel.k
    x, w = ctx.random((bt, n, k), precision), ctx.random((bt, k, m), precision, scale=k**-0.5)
    tensors = [
        TensorSpec("x", x.shape, np.float32),
        TensorSpec("w", w.shape, np.float32),
        TensorSpec("y", (bt, n, m), np.float32),
    ]
    op = OpSpec(S.BuiltinOperator.BATCH_MATMUL, [0, 1], [2], S.BatchMatMulOptionsT(adjX=False, adjY=False))
    model = ctx.interpreter(ModelSpec(tensors=tensors, op=op, inputs=[0, 1], outputs=[2]))
    model.set_inputs(x, w)
    return forward(
        kernel, precision, model, lambda: check_batched_matmul(model.output(), x, w, precision, ctx.rng), "BATCH_MATMUL"
    )


OPERATIONS: dict[str, Callable[[TfliteContext, Any, Precision], Prepared]] = {
    "pooling": prepare_pooling,
    "batch_norm": no_builtin,
    "norm": no_builtin,
    "softmax": prepare_softmax,
    "activation": prepare_activation,
    "embedding": prepare_embedding,
    "attention": no_builtin,
    "elementwise": prepare_elementwise,
    "batched_gemm": prepare_batched_gemm,
}
