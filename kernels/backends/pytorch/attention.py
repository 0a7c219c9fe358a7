"""Scaled dot-product attention through F.scaled_dot_product_attention: PyTorch picks the fused
kernel the device has (flash / memory-efficient / cuDNN on CUDA, its flash implementation on
CPU, the math path otherwise); grouped-query attention (fewer key/value heads) with enable_gqa.
On CUDA each named kernel (flash, efficient, cudnn, math) is also timed and checked on its own,
in the result's info["sdpa_backends"], or `unsupported` there with PyTorch's reason.

The reference (kernels/reference/layers.py) computes softmax(Q K^T / sqrt(d) + causal mask) V in float64
for a few (batch, head) pairs, with each query head reading key/value head h // (heads / kv_heads)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...layers import AttentionKernel
from ...precision import Precision
from ...reference import layers as ref
from ...results import Check
from ...timing.stopping import StopRule
from ..contract.base import Prepared, TimedPart, Unsupported
from ..shared.torch_context import TorchContext
from .layer_common import forward_part, host64, layer_dtype

# torch.nn.attention.SDPBackend's members, by the name each gets in the result ("fwd_<name>").
SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
REASON_CHARS = 1000
US_PER_S = 1e6


def prepare(ctx: TorchContext, kernel: AttentionKernel, precision: Precision) -> Prepared:
    kk = kernel
    if kk.heads % kk.kv_heads:
        raise Unsupported(f"{kk.heads} query heads cannot share {kk.kv_heads} key/value heads evenly")
    dtype = layer_dtype(ctx, kk, precision, matmul=True)
    q = ctx.random((kk.batch, kk.heads, kk.seq_q, kk.head_dim), dtype)
    k = ctx.random((kk.batch, kk.kv_heads, kk.seq_kv, kk.head_dim), dtype)
    v = ctx.random((kk.batch, kk.kv_heads, kk.seq_kv, kk.head_dim), dtype)
    gqa = kk.kv_heads != kk.heads
    pairs = ref.attention_pairs(kk.batch, kk.heads)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["y"] = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=kk.causal, enable_gqa=gqa)

    def reference() -> np.ndarray:  # top-left aligned causal mask, as SDPA's is_causal
        return ref.attention(host64(q), host64(k), host64(v), kk.causal, pairs)

    result = lambda: torch.stack([out["y"][b, h] for b, h in pairs])  # noqa: E731
    prepared = forward_part(
        kk,
        precision,
        run,
        result,
        reference,
        ref.METHOD,
        f"(batch, head) pairs {pairs}",
        info={"api": "torch.nn.functional.scaled_dot_product_attention"},
    )
    if ctx.is_cuda:  # each fused kernel by name, beside PyTorch's own pick (the "fwd" part)

        def check(y: torch.Tensor) -> Check:
            got = torch.stack([y[b, h] for b, h in pairs])
            return ref.compare(host64(got), reference(), precision, f"(batch, head) pairs {pairs}")

        call = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
            q, k, v, is_causal=kk.causal, enable_gqa=gqa
        )
        prepared.after = lambda backend, rule: {
            "sdpa_backends": time_named_backends(
                backend, rule, call, check, kk.flops("fwd"), kk.min_bytes("fwd", precision), precision
            )
        }
    return prepared


def time_named_backends(
    backend: Any,
    rule: StopRule,
    call: Callable[[], torch.Tensor],
    check: Callable[[torch.Tensor], Check],
    flops: float,
    min_bytes: float,
    precision: Precision,
) -> dict[str, dict]:
    """Time `call` under each SDPA backend PyTorch names (torch.nn.attention.sdpa_kernel), one
    entry per name ("fwd_flash" ...): its time, throughput and check, or `unsupported` with the
    reasons PyTorch gives (the warnings it emits before "No available kernel") when that kernel
    cannot take this shape, dtype or device. They sit beside the kernel's time, not in it: they
    are alternatives to PyTorch's own pick, not further work, so they are not parts (whose times add up)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    entries: dict[str, dict] = {}
    out: dict[str, torch.Tensor] = {}  # the last output; emptied for each backend, so none sees another's

    def run() -> None:
        out["y"] = call()

    for name, member in SDPA_BACKENDS.items():
        key = f"fwd_{name}"
        chosen = getattr(SDPBackend, member, None)
        if chosen is None:
            entries[key] = {"status": "unsupported", "reason": f"torch {torch.__version__} has no SDPBackend.{member}"}
            continue
        out.clear()
        with sdpa_kernel(chosen):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    run()  # warm-up; raises when this kernel cannot run the problem
                except RuntimeError as exc:
                    why = "; ".join(dict.fromkeys(str(w.message).strip() for w in caught))
                    entries[key] = {"status": "unsupported", "reason": f"{exc} {why}".strip()[:REASON_CHARS]}
                    continue
            part = TimedPart(key, run, lambda: check(out["y"]), flops, min_bytes, precision=precision)
            m = backend.measure(run, rule, part)
        result = check(out["y"])
        seconds = m.stats.median / US_PER_S
        entries[key] = {
            "status": "ok" if result.passed else "failed",
            "time_us": m.stats.model_dump(),
            "tflops": flops / seconds / 1e12 if flops else None,
            "gbps": min_bytes / seconds / 1e9,
            "check": result.model_dump(),
            **part.info,
        }
    return entries
