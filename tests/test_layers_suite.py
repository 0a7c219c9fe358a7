"""AI Matrix's layer suite (`--suite layers`), the element-wise and batched-GEMM kernel types with
their model mapping, and the named SDPA kernels timed beside attention.

Known layers the suite must hold (from the networks' papers): AlexNet's conv1 is 11x11 stride 4 on
a 227x227 crop with 96 filters (Krizhevsky et al. 2012, Caffe's reference), its fc6 reads the
6x6x256 pool5 map into 4096 units; VGG-16's convolutions are 3x3 stride 1 (Simonyan & Zisserman
2015) and its fc6 reads 7x7x512 into 4096; ResNet's stem is 7x7 stride 2 with 64 filters and its
bottleneck ends in 1x1 512 -> 2048 (He et al. 2016)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from importlib import resources

import pytest
import torch

from deepbench.kernels.backends.pytorch import attention, batched_gemm
from deepbench.kernels.backends.pytorch.backend import TorchBackend
from deepbench.kernels.catalog import ConvKernel, GemmKernel, RnnKernel
from deepbench.kernels.harness.execute import run_item, stop_rule
from deepbench.kernels.layers import BatchedGemmKernel, ElementwiseKernel
from deepbench.kernels.models.dataset import OperatorDataset
from deepbench.kernels.models.extract import capture, extract
from deepbench.kernels.models.suite import dataset_kernels
from deepbench.kernels.precision import Precision
from deepbench.kernels.provenance import kernels_sha256
from deepbench.kernels.reference.torch_checks import relative_error, verdict
from deepbench.kernels.results import PlanItem, Settings, Status
from deepbench.kernels.results_file import read_results
from deepbench.kernels.suites import suite_kernels

from .conftest import run_cli

SETTINGS = Settings(
    mode="fast", target_rel_precision=0.05, min_samples=3, max_samples=50, time_cap_s=0.05, min_sample_s=0.0005
)
# Lines per AI Matrix file (the data file keeps every line) and the sweeps of test_rnn_ops.sh.
AI_MATRIX_LINES = {"conv": 109, "fc": 9, "pool": 24, "normal": 77, "active": 96}
RNN_SWEEP = 2 * 2 * 10  # batch 16, 32 x sequence 32, 64 x units 256..2560 by 256
AI_MATRIX_ACTIVATIONS = 3  # relu, sigmoid, tanh (softmax is its own kernel type)


@pytest.fixture(scope="module")
def layers() -> list:
    return suite_kernels("layers")


def test_suite_holds_every_ai_matrix_line_with_stable_unique_ids(layers) -> None:
    counts = Counter(k.op for k in layers)
    assert counts == {
        "conv": AI_MATRIX_LINES["conv"],
        "gemm": AI_MATRIX_LINES["fc"],
        "rnn": 2 * RNN_SWEEP,
        "pooling": 2 * AI_MATRIX_LINES["pool"],
        "batch_norm": AI_MATRIX_LINES["normal"],
        "activation": AI_MATRIX_ACTIVATIONS * AI_MATRIX_LINES["active"],
        "softmax": AI_MATRIX_LINES["active"],
    }
    assert len({k.id for k in layers}) == len(layers) and all(k.set == "layers" for k in layers)
    assert layers[0].id == "conv/layers/000"
    assert kernels_sha256(layers) == kernels_sha256(suite_kernels("layers"))  # the frozen hash is reproducible


def test_data_file_cites_its_source() -> None:
    data = json.loads(resources.files("deepbench.kernels").joinpath("data", "ai_matrix.json").read_text())
    assert data["source"]["repo"] == "alibaba/ai-matrix"
    assert all(re.fullmatch(r"[0-9a-f]{40}", c) for c in data["source"]["commits"].values())
    for op, entries in data["kernels"].items():
        for e in entries:
            assert re.fullmatch(r"(conv|fc|pool|normal|active)\.params:\d+|test_rnn_ops\.sh:\d+", e["source"]), e
            assert (e["application"] is None) == (op == "rnn")


def test_known_layers_are_in_the_suite(layers) -> None:
    convs = {(k.application, k.n, k.c, k.h, k.k, k.r, k.stride_h) for k in layers if isinstance(k, ConvKernel)}
    assert ("alexnet", 64, 3, 227, 96, 11, 4) in convs  # AlexNet conv1
    assert ("resnet50/152", 10, 3, 224, 64, 7, 2) in convs and ("resnet50/152", 1, 3, 224, 64, 7, 2) in convs
    assert ("resnet50/152", 1, 512, 7, 2048, 1, 1) in convs  # the last bottleneck's 1x1 expansion
    vgg = [k for k in layers if isinstance(k, ConvKernel) and k.application == "vgg16"]
    assert vgg and all((k.r, k.s, k.stride_h) == (3, 3, 1) for k in vgg) and {k.k for k in vgg} == {64, 128, 256}
    fcs = {(k.application, k.m, k.n, k.k) for k in layers if isinstance(k, GemmKernel)}
    assert ("alexnet", 4096, 64, 6 * 6 * 256) in fcs and ("vgg16", 4096, 10, 7 * 7 * 512) in fcs
    alexnet_conv1 = next(k for k in layers if isinstance(k, ConvKernel))
    assert (alexnet_conv1.out_h, alexnet_conv1.out_w) == (55, 55)  # 227 - 11 over 4, plus 1
    rnns = [k for k in layers if isinstance(k, RnnKernel)]
    assert {k.cell for k in rnns} == {"lstm", "gru"} and {k.hidden for k in rnns} == set(range(256, 2561, 256))


@pytest.mark.slow
def test_small_layers_run_on_the_cpu_with_checks(tmp_path) -> None:
    out = tmp_path / "layers"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "layers",
        "--ops",
        "gemm,batch_norm,pooling",
        "--where",
        "n=1",
        "--limit",
        "2",
        "--fast",
        "--time-cap",
        "0.05",
        "--quiet",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    results = read_results(out / "results.jsonl")
    assert Counter(r.kernel.op for r in results) == {"gemm": 2, "batch_norm": 2, "pooling": 2}
    assert all(r.status is Status.OK and r.check.passed and r.kernel.set == "layers" for r in results)


# --- element-wise and batched GEMM ---------------------------------------------------------------


def test_elementwise_costs_and_broadcast_rule() -> None:
    k = ElementwiseKernel(set="model", index=0, function="mul", elements=4096, a_elements=4096, b_elements=64)
    assert k.flops() == 0 and k.min_bytes("fwd", Precision.FP32) == (4096 + 64 + 4096) * 4
    with pytest.raises(ValueError, match="does not divide"):
        ElementwiseKernel(set="model", index=0, function="add", elements=100, a_elements=100, b_elements=7)
    b = BatchedGemmKernel(set="model", index=0, batch=12, m=128, n=128, k=64, a_t=True, b_t=False)
    assert b.flops() == 2 * 12 * 128 * 128 * 64


def test_wrong_batch_entry_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library that computed only the first entry of the batch must fail the check."""
    real = torch.bmm

    def first_only(x, y, out):
        real(x, y, out=out)
        out[1:].zero_()

    monkeypatch.setattr(batched_gemm.torch, "bmm", first_only)
    k = BatchedGemmKernel(set="model", index=0, batch=3, m=8, n=8, k=8, a_t=False, b_t=False)
    r = run_item(TorchBackend(SETTINGS), PlanItem(kernel=k, precision="fp32"), SETTINGS)
    assert r.status is Status.FAILED and not r.check.passed


class _Attention(torch.nn.Module):
    """bmm-softmax-bmm attention, as models written before SDPA compute it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(x, x.transpose(-1, -2))  # (b, h, s, d) @ (b, h, d, s)
        return torch.bmm(scores.softmax(-1).flatten(0, 1), x.flatten(0, 1))


def test_bmm_and_adds_map_to_kernels() -> None:
    b, h, s, d = 2, 3, 16, 8
    ops = capture(_Attention(), torch.empty(b, h, s, d, device="meta"))
    ds = OperatorDataset(
        model="toy",
        source="test",
        batch=b,
        input_shape=(b, h, s, d),
        parameters=0,
        torch_version=torch.__version__,
        operators=tuple(ops),
    )
    kernels, unmapped = dataset_kernels(ds)
    assert unmapped == []
    bmms = {(k.batch, k.m, k.n, k.k) for k in kernels if isinstance(k, BatchedGemmKernel)}
    assert bmms == {(b * h, s, s, d), (b * h, d, s, s)}  # QK^T: s x s over d; PV: d x s over s
    assert sum(k.flops() * k.count for k in kernels) == pytest.approx(ds.total_flops())
    for model, adds in (("bert-base", 26), ("gpt2", 25)):  # residual and embedding adds, all mapped now
        mapped, left = dataset_kernels(extract(model))
        assert left == [] and sum(k.count for k in mapped if isinstance(k, ElementwiseKernel)) == adds
    llama, _ = dataset_kernels(extract("llama3-8b-layer", seq=128))
    rope = [k for k in llama if isinstance(k, ElementwiseKernel) and k.b_elements == 128 * 128]
    assert rope and all(k.function == "mul" and k.elements == k.a_elements for k in rope)  # RoPE's cos/sin table


@pytest.mark.slow
def test_model_suite_runs_elementwise_on_the_cpu(tmp_path) -> None:
    out = tmp_path / "bert"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "model:bert-base",
        "--batch",
        "1",
        "--fast",
        "--time-cap",
        "0.05",
        "--ops",
        "elementwise",
        "--quiet",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    (r,) = read_results(out / "results.jsonl")
    assert r.status is Status.OK and r.check.passed and r.kernel.count == 26 and r.gbps > 0


# --- named SDPA kernels ---------------------------------------------------------------------------


def test_named_sdpa_backends_time_or_say_why() -> None:
    """On the CPU only the math kernel and PyTorch's CPU flash kernel exist: the others must come
    back unsupported with PyTorch's reason, the ones that run with their time and a passed check."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 8, 16, generator=gen) for _ in range(3))
    ref = torch.softmax(q.double() @ k.double().transpose(-1, -2) / math.sqrt(16), -1) @ v.double()
    check = lambda y: verdict(relative_error(y, ref), Precision.FP32, "reference-fp64")  # noqa: E731
    call = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)  # noqa: E731
    entries = attention.time_named_backends(
        TorchBackend(SETTINGS), stop_rule(SETTINGS), call, check, 1.0, 1.0, Precision.FP32
    )
    assert set(entries) == {"fwd_flash", "fwd_efficient", "fwd_cudnn", "fwd_math"}
    assert entries["fwd_math"]["status"] == "ok" and entries["fwd_math"]["check"]["passed"]
    assert entries["fwd_math"]["time_us"]["median"] > 0
    assert entries["fwd_efficient"]["status"] == "unsupported" and entries["fwd_efficient"]["reason"]
