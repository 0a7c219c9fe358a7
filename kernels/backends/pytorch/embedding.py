"""Embedding lookup (a row gather); the reference gathers the same rows in float64 by indexing (reference/layers.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...layers import EmbeddingKernel
from ...precision import Precision
from ...reference import layers as ref
from ..contract.base import Prepared
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, host64, layer_dtype


def prepare(ctx: TorchContext, kernel: EmbeddingKernel, precision: Precision) -> Prepared:
    table = ctx.random((kernel.vocab, kernel.dim), layer_dtype(ctx, kernel, precision))
    ids = torch.randint(0, kernel.vocab, (kernel.lookups,), generator=ctx.generator, device=ctx.device)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = F.embedding(ids, table)

    return forward_part(
        kernel, precision, run, lambda: out["y"], lambda: ref.embedding(host64(table), ids.cpu().numpy()), ref.METHOD
    )
