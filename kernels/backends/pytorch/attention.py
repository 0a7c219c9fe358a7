"""Scaled dot-product attention through F.scaled_dot_product_attention: PyTorch picks the fused
kernel the device has (flash / memory-efficient / cuDNN on CUDA, its flash implementation on
CPU, the math path otherwise); grouped-query attention (fewer key/value heads) with enable_gqa.

The reference computes softmax(Q K^T / sqrt(d) + causal mask) V in float64 for a few (batch,
head) pairs, with each query head reading key/value head h // (heads / kv_heads)."""

from __future__ import annotations

import math

import torch

from ...layers import AttentionKernel
from ...precision import Precision
from ..base import Prepared, Unsupported
from .context import TorchContext
from .layer_common import forward_part, layer_dtype


def prepare(ctx: TorchContext, kernel: AttentionKernel, precision: Precision) -> Prepared:
    kk = kernel
    if kk.heads % kk.kv_heads:
        raise Unsupported(f"{kk.heads} query heads cannot share {kk.kv_heads} key/value heads evenly")
    dtype = layer_dtype(ctx, kk, precision, matmul=True)
    q = ctx.random((kk.batch, kk.heads, kk.seq_q, kk.head_dim), dtype)
    k = ctx.random((kk.batch, kk.kv_heads, kk.seq_kv, kk.head_dim), dtype)
    v = ctx.random((kk.batch, kk.kv_heads, kk.seq_kv, kk.head_dim), dtype)
    gqa = kk.kv_heads != kk.heads
    group = kk.heads // kk.kv_heads
    pairs = sorted({(0, 0), (kk.batch - 1, kk.heads - 1)})
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=kk.causal, enable_gqa=gqa)

    def reference() -> torch.Tensor:
        rows = []
        for b, h in pairs:
            qd, kd, vd = q[b, h].double(), k[b, h // group].double(), v[b, h // group].double()
            scores = qd @ kd.T / math.sqrt(kk.head_dim)
            if kk.causal:  # top-left aligned, as SDPA's is_causal
                keep = torch.ones(kk.seq_q, kk.seq_kv, dtype=torch.bool, device=scores.device).tril()
                scores = scores.masked_fill(~keep, float("-inf"))
            weights = torch.exp(scores - scores.amax(-1, keepdim=True))
            rows.append(weights / weights.sum(-1, keepdim=True) @ vd)
        return torch.stack(rows)

    result = lambda: torch.stack([out["y"][b, h] for b, h in pairs])  # noqa: E731
    return forward_part(kk, precision, run, result, reference, "reference-fp64",
                        f"(batch, head) pairs {pairs}", info={"api": "torch.nn.functional.scaled_dot_product_attention"})
