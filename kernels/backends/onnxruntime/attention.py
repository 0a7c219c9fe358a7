"""Scaled dot-product attention on onnxruntime through ONNX's Attention operator (opset 23):
4-D Q (batch, heads, seq_q, head_dim) and K, V (batch, kv_heads, seq_kv, head_dim), grouped-query
attention when kv_heads < heads, scale 1/sqrt(head_dim), is_causal with the top-left aligned
mask (as F.scaled_dot_product_attention). An onnxruntime or onnx too old for opset 23 makes it
`unsupported` with the runtime's reason (layers.bind). Q, K and V are graph inputs: they are
activations in a model. Checked in float64 for a few (batch, head) pairs (kernels/reference/layers.py)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from ...layers import AttentionKernel
from ...precision import Precision
from ...reference import layers as ref
from ..contract.base import Prepared, Unsupported
from .context import OrtContext
from .layers import bind, forward, require_fp32

ATTENTION_OPSET = 23


def prepare(ctx: OrtContext, kernel: AttentionKernel, precision: Precision) -> Prepared:
    require_fp32(kernel, precision)
    kk = kernel
    if kk.heads % kk.kv_heads:
        raise Unsupported(f"{kk.heads} query heads cannot share {kk.kv_heads} key/value heads evenly")
    q = ctx.random((kk.batch, kk.heads, kk.seq_q, kk.head_dim), precision)
    k = ctx.random((kk.batch, kk.kv_heads, kk.seq_kv, kk.head_dim), precision)
    v = ctx.random((kk.batch, kk.kv_heads, kk.seq_kv, kk.head_dim), precision)
    y = np.empty_like(q)
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=int(kk.causal))
    call = bind(ctx, node, {"q": q, "k": k, "v": v}, {"y": y}, {}, "Attention", ATTENTION_OPSET)
    pairs = ref.attention_pairs(kk.batch, kk.heads)

    def check():
        got = np.stack([y[b, h] for b, h in pairs])
        return ref.compare(got, ref.attention(q, k, v, kk.causal, pairs), precision, f"(batch, head) pairs {pairs}")

    return forward(
        kk, precision, call, check, "Attention", opset=ATTENTION_OPSET, grouped_query=kk.kv_heads != kk.heads
    )
