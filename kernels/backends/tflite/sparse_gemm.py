"""Sparse GEMM on TFLite: FULLY_CONNECTED with CSR-sparse constant weights, fp32.

The weight tensor carries TFLite's sparsity parameters (dimension 0 dense, dimension 1
SPARSE_CSR, int32 segments and indices) and its buffer holds only the non-zero values; TFLite's
FULLY_CONNECTED runs it with its sparse-weight kernel (FullyConnectedSparseWeight), without
densifying (single-threaded: the multi-threaded sparse kernel takes 1x4 block sparsity only,
which would change DeepBench's random sparsity). The XNNPACK delegate is kept off for this model:
LiteRT 2.3's delegate, like tflite-runtime 2.14's, claims a FULLY_CONNECTED whose weights are
sparse and reads the CSR values as a dense matrix (NaN outputs on a small model, a segmentation
fault on a large one; tests/test_tflite_backend.py watches for a fix), so the model runs on the
builtin kernels. A sparse A (m x k) is the weights of m units over k inputs; B^T (n x k) is the input,
so the output is C^T (n x m), C in column-major. The dense FULLY_CONNECTED of the same shape is
timed beside it for the speedup, as for the other backends. int8 sparse weights are not run
(TFLite's sparse int8 path needs block sparsity), so int8 is unsupported."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...catalog import SparseGemmKernel
from ...precision import Precision
from ...reference.numpy_checks import check_matmul
from ..contract.base import Prepared, TimedPart, Unsupported
from .context import TfliteContext
from .flatbuffer import CsrSparsity
from .gemm import fc_model


def csr(dense: np.ndarray) -> tuple[CsrSparsity, np.ndarray]:
    rows, cols = np.nonzero(dense)
    counts = np.bincount(rows, minlength=dense.shape[0])
    row_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return CsrSparsity(dense.shape[0], row_ptr, cols.astype(np.int32)), dense[rows, cols].astype(np.float32)


def prepare(ctx: TfliteContext, kernel: SparseGemmKernel, precision: Precision) -> Prepared:
    if precision is not Precision.FP32:
        raise Unsupported(f"TFLite's random-sparse FULLY_CONNECTED runs fp32 weights; {precision.value} is not run")
    if kernel.a_t or kernel.b_t:
        raise Unsupported("transposed sparse operands are not in DeepBench's sparse sets")
    m, n, k = kernel.m, kernel.n, kernel.k
    a = ctx.random((m, k), precision, scale=k**-0.5)
    a[ctx.rng.random((m, k)) < kernel.sparsity] = 0.0
    sparsity, values = csr(a)
    x = ctx.random((n, k), precision)
    model = ctx.interpreter(fc_model((n, k), a, precision, sparsity=sparsity, w_data=values), xnnpack=False)
    model.set_inputs(x)
    info = model.info("FULLY_CONNECTED (CSR sparse weights)")
    info.update(nnz=int(values.size), format="csr", xnnpack="off: LiteRT's delegate misreads sparse weights")
    part = TimedPart(
        "fwd",
        model.invoke,
        lambda: check_matmul(model.output(), x, a.T, precision, ctx.rng),
        kernel.flops(),
        kernel.min_bytes("fwd", precision),
        info=info,
        capturable=False,
    )

    def dense_beside(backend: Any, rule: Any) -> dict[str, Any]:
        dense = ctx.interpreter(fc_model((n, k), a, precision))
        dense.set_inputs(x)
        dense.invoke()
        check = check_matmul(dense.output(), x, a.T, precision, ctx.rng)
        timed = backend.measure(dense.invoke, rule, part)
        return {
            "dense_time_us": timed.stats.model_dump(),
            "dense_tflops": kernel.dense_flops() / timed.stats.median / 1e6,
            "dense_check": check.model_dump(),
            "dense_executed_by": dense.info("FULLY_CONNECTED")["executed_by"],
        }

    return Prepared(parts=[part], after=dense_beside)
