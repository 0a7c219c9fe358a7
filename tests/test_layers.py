"""Layer benchmarks (kernels/layers.py) on the torch backend, and model operators mapped onto them."""

from __future__ import annotations

import pytest
import torch

from deepbench.kernels.backends.pytorch import pointwise
from deepbench.kernels.backends.pytorch.backend import TorchBackend
from deepbench.kernels.catalog import KERNEL_ADAPTER
from deepbench.kernels.harness.execute import run_item
from deepbench.kernels.layers import (
    LAYER_OPS,
    ActivationKernel,
    AttentionKernel,
    EmbeddingKernel,
    NormKernel,
    PoolingKernel,
)
from deepbench.kernels.models.extract import extract
from deepbench.kernels.models.suite import dataset_kernels
from deepbench.kernels.results import PlanItem, Settings, Status

SETTINGS = Settings(
    mode="fast", target_rel_precision=0.05, min_samples=3, max_samples=50, time_cap_s=0.05, min_sample_s=0.0005
)
SMALL = {
    "max-pool": dict(
        op="pooling", mode="max", n=2, c=3, h=13, w=13, r=3, s=3, pad_h=1, pad_w=1, stride_h=2, stride_w=2
    ),
    "global-avg-pool": dict(
        op="pooling", mode="avg", n=1, c=4, h=7, w=7, r=7, s=7, pad_h=0, pad_w=0, stride_h=7, stride_w=7
    ),
    "batch-norm": dict(op="batch_norm", n=2, c=8, h=5, w=5),
    "layer-norm": dict(op="norm", kind="layer", rows=16, cols=64),
    "rms-norm": dict(op="norm", kind="rms", rows=16, cols=64),
    "softmax": dict(op="softmax", rows=8, cols=100),
    **{
        f"act-{f}": dict(op="activation", function=f, elements=1000)
        for f in ("relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid")
    },
    "embedding": dict(op="embedding", vocab=100, dim=16, lookups=30),
    "attention-gqa-causal": dict(
        op="attention", batch=2, heads=4, kv_heads=2, seq_q=16, seq_kv=16, head_dim=8, causal=True
    ),
    "attention": dict(op="attention", batch=1, heads=4, kv_heads=4, seq_q=8, seq_kv=24, head_dim=8, causal=False),
    "add": dict(op="elementwise", function="add", elements=3000, a_elements=3000, b_elements=3000),
    "mul-broadcast": dict(
        op="elementwise", function="mul", elements=4 * 16 * 8, a_elements=4 * 16 * 8, b_elements=16 * 8
    ),
    "add-scalar": dict(op="elementwise", function="add", elements=64, a_elements=64, b_elements=1),
    **{
        f"bmm-{'T' if a_t else 'N'}{'T' if b_t else 'N'}": dict(
            op="batched_gemm", batch=3, m=17, n=9, k=12, a_t=a_t, b_t=b_t
        )
        for a_t in (False, True)
        for b_t in (False, True)
    },
}


def kernel(name: str):
    return KERNEL_ADAPTER.validate_python({**SMALL[name], "set": "model", "index": 0})


@pytest.fixture(scope="module")
def backend() -> TorchBackend:
    return TorchBackend(SETTINGS)


@pytest.mark.parametrize("name", list(SMALL))
def test_layer_kernels_run_and_pass_their_checks(backend: TorchBackend, name: str) -> None:
    for precision in ("fp32", "bf16"):
        r = run_item(backend, PlanItem(kernel=kernel(name), precision=precision), SETTINGS)
        assert r.status is Status.OK, (name, precision, r.reason)
        assert r.check.passed and r.check.method == "reference-fp64" and r.time_us.median > 0
        assert r.gbps and r.gbps > 0


def test_every_layer_op_is_covered() -> None:
    assert {spec["op"] for spec in SMALL.values()} == set(LAYER_OPS)


def test_int8_is_unsupported_with_reason(backend: TorchBackend) -> None:
    r = run_item(backend, PlanItem(kernel=kernel("softmax"), precision="int8"), SETTINGS)
    assert r.status is Status.UNSUPPORTED and "int8" in r.reason


def test_wrong_layer_is_caught(backend: TorchBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """GELU's tanh form instead of the exact one differs by about 1e-3: the check must see it."""
    monkeypatch.setitem(pointwise.FUNCTIONS, "gelu", lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    r = run_item(backend, PlanItem(kernel=kernel("act-gelu"), precision="fp32"), SETTINGS)
    assert r.status is Status.FAILED and not r.check.passed


def test_attention_without_its_mask_is_caught(backend: TorchBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional,
        "scaled_dot_product_attention",
        lambda q, k, v, is_causal=False, enable_gqa=False: real(q, k, v, enable_gqa=enable_gqa),
    )
    r = run_item(backend, PlanItem(kernel=kernel("attention-gqa-causal"), precision="fp32"), SETTINGS)
    assert r.status is Status.FAILED and not r.check.passed


def test_model_operators_map_to_layer_kernels() -> None:
    bert, _ = dataset_kernels(extract("bert-base", seq=128))
    assert (
        AttentionKernel(
            set="model",
            index=0,
            application="bert-base",
            count=12,
            batch=1,
            heads=12,
            kv_heads=12,
            seq_q=128,
            seq_kv=128,
            head_dim=64,
            causal=False,
        )
        in bert
    )
    norms = [k for k in bert if isinstance(k, NormKernel)]
    assert [(k.kind, k.rows, k.cols, k.count) for k in norms] == [("layer", 128, 768, 25)]
    assert {(k.vocab, k.dim, k.lookups) for k in bert if isinstance(k, EmbeddingKernel)} == {
        (30522, 768, 128),
        (512, 768, 128),
        (2, 768, 128),
    }
    assert {(k.function, k.elements) for k in bert if isinstance(k, ActivationKernel)} == {
        ("gelu", 128 * 3072),
        ("tanh", 768),
    }
    r50, _ = dataset_kernels(extract("resnet50"))
    pools = {(k.mode, k.c, k.h, k.r, k.stride_h, k.pad_h) for k in r50 if isinstance(k, PoolingKernel)}
    assert pools == {("max", 64, 112, 3, 2, 1), ("avg", 2048, 7, 7, 7, 0)}
    llama, _ = dataset_kernels(extract("llama3-8b-layer", seq=256))
    (attn,) = [k for k in llama if isinstance(k, AttentionKernel)]
    assert (attn.heads, attn.kv_heads, attn.seq_q, attn.head_dim, attn.causal) == (32, 8, 256, 128, True)
