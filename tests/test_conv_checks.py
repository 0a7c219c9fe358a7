"""The sampled float64 convolution checks (ConvSampler) against PyTorch's own convolution and its
gradients, over geometries with padding, strides, non-square filters and a filter wider than
tall, and over several seeds: correct outputs pass, an output 1% off fails."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.grad import conv2d_input, conv2d_weight

from deepbench.kernels.backends.shared.torch_context import TorchContext
from deepbench.kernels.catalog import ConvKernel
from deepbench.kernels.precision import Precision
from deepbench.kernels.reference.conv import CHECK_POINTS, ConvSampler

GEOMETRIES = [  # n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w
    (2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 1),
    (2, 5, 13, 10, 3, 5, 3, 2, 0, 2, 3),
    (1, 4, 7, 7, 2, 7, 7, 3, 3, 2, 2),
    (2, 2, 12, 30, 3, 5, 20, 0, 0, 2, 2),  # DeepSpeech's first layer, scaled down
    (3, 6, 5, 5, 8, 1, 1, 0, 0, 1, 1),
]
OFF = 1.01  # an output this far from the right one fails any float check


def _kernel(g: tuple[int, ...]) -> ConvKernel:
    n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w = g
    return ConvKernel(
        set="train",
        index=0,
        n=n,
        c=c,
        h=h,
        w=w,
        k=k,
        r=r,
        s=s,
        pad_h=pad_h,
        pad_w=pad_w,
        stride_h=stride_h,
        stride_w=stride_w,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("g", GEOMETRIES)
def test_sampled_checks_pass_right_outputs_and_fail_wrong_ones(g: tuple[int, ...], seed: int) -> None:
    kk = _kernel(g)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(kk.n, kk.c, kk.h, kk.w, generator=gen)
    w = torch.randn(kk.k, kk.c, kk.r, kk.s, generator=gen)
    dy = torch.randn(kk.n, kk.k, kk.out_h, kk.out_w, generator=gen)
    geometry = dict(stride=(kk.stride_h, kk.stride_w), padding=(kk.pad_h, kk.pad_w))
    x64, w64, dy64 = x.double(), w.double(), dy.double()
    y = F.conv2d(x64, w64, **geometry)
    assert y.shape == dy.shape
    outputs = {
        "fwd": y,
        "bwd_data": conv2d_input(x.shape, w64, dy64, **geometry),
        "bwd_filter": conv2d_weight(x64, w.shape, dy64, **geometry),
    }
    sampler = ConvSampler(TorchContext(torch.device("cpu"), seed=seed), kk, x, w, dy)
    checks = {"fwd": sampler.check_fwd, "bwd_data": sampler.check_bwd_data, "bwd_filter": sampler.check_bwd_filter}
    for direction, check in checks.items():
        right = check(outputs[direction].float(), Precision.FP32)
        assert right.passed and right.detail == f"{CHECK_POINTS} random elements", (direction, right)
        wrong = check((outputs[direction] * OFF).float(), Precision.FP32)
        assert not wrong.passed and wrong.error == pytest.approx(OFF - 1, rel=1e-3), (direction, wrong)


def test_a_backward_filter_check_gathers_in_chunks(monkeypatch) -> None:
    """A point of a backward-filter check reads the whole batch: the gather goes a chunk of points
    at a time, and the chunks give the same figure as one gather."""
    from deepbench.kernels.reference import conv

    kk = _kernel(GEOMETRIES[0])
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(kk.n, kk.c, kk.h, kk.w, generator=gen), torch.randn(kk.k, kk.c, kk.r, kk.s, generator=gen)
    dy = torch.randn(kk.n, kk.k, kk.out_h, kk.out_w, generator=gen)
    dw = conv2d_weight(x.double(), w.shape, dy.double(), stride=1, padding=1).float()
    whole = ConvSampler(TorchContext(torch.device("cpu")), kk, x, w, dy).check_bwd_filter(dw, Precision.FP32)
    per_point = 2 * kk.n * kk.out_h * kk.out_w * conv.FLOAT64_BYTES
    monkeypatch.setattr(conv, "MAX_GATHER_BYTES", 5 * per_point)  # 10 chunks of at most 5 points
    chunked = ConvSampler(TorchContext(torch.device("cpu")), kk, x, w, dy).check_bwd_filter(dw, Precision.FP32)
    assert chunked.passed and chunked.error == pytest.approx(whole.error, rel=1e-9)
