"""DeepBench's padding rules (kernels/padding.py), every layout and precision, against the rules
of `gemm_bench.cu` and `conv_bench.cu`, and what the PyTorch backend hands the library."""

from __future__ import annotations

import pytest

from deepbench.kernels import padding
from deepbench.kernels.padding import PadMode
from deepbench.kernels.precision import Precision
from deepbench.kernels.suites import select

ODD = dict(m=35, n=7133, k=2561)  # every dimension off every multiple


@pytest.mark.parametrize(
    "a_t,b_t,padded",
    [
        (False, False, {"m": 40, "n": 7133, "k": 2568}),  # NN: m and k
        (True, False, {"m": 40, "n": 7133, "k": 2568}),  # TN: m and k
        (False, True, {"m": 40, "n": 7136, "k": 2561}),  # NT: m and n
        (True, True, {"m": 40, "n": 7136, "k": 2568}),  # TT: m, n and k
    ],
)
@pytest.mark.parametrize("precision", [Precision.FP16, Precision.BF16])
def test_half_gemms_pad_to_eight_by_layout(a_t: bool, b_t: bool, padded: dict[str, int], precision: Precision) -> None:
    assert padding.gemm_shape(**ODD, a_t=a_t, b_t=b_t, precision=precision) == padded


@pytest.mark.parametrize("a_t,b_t,dims", [((False, False), None, ("m", "k")), ((True, True), None, ("m", "n", "k"))])
def test_tf32_and_fp8_keep_sixteen_bytes(a_t, b_t, dims) -> None:
    at, bt = a_t
    tf32 = padding.gemm_shape(**ODD, a_t=at, b_t=bt, precision=Precision.TF32)
    fp8 = padding.gemm_shape(**ODD, a_t=at, b_t=bt, precision=Precision.FP8)
    for name in ("m", "n", "k"):
        if name in dims:
            assert tf32[name] % 4 == 0 and tf32[name] - ODD[name] < 4
            assert fp8[name] % 16 == 0 and fp8[name] - ODD[name] < 16
        else:
            assert tf32[name] == fp8[name] == ODD[name]


@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
def test_int8_pads_m_to_four_only_and_fp32_nothing(a_t: bool, b_t: bool) -> None:
    assert padding.gemm_shape(**ODD, a_t=a_t, b_t=b_t, precision=Precision.INT8) == {"m": 36, "n": 7133, "k": 2561}
    assert padding.gemm_shape(**ODD, a_t=a_t, b_t=b_t, precision=Precision.FP32) == ODD


def test_aligned_shapes_are_never_padded() -> None:
    for precision in Precision:
        assert padding.gemm_shape(64, 128, 256, True, True, precision) == {"m": 64, "n": 128, "k": 256}


def test_convolutions_pad_as_conv_bench() -> None:
    # half: c and k to 8; int8: c, h, w to 4, then c and k to 32; fp32: nothing
    assert padding.conv_shape(16, 3, 225, 225, 60, Precision.FP16) == {"n": 16, "c": 8, "h": 225, "w": 225, "k": 64}
    assert padding.conv_shape(16, 3, 225, 225, 60, Precision.BF16) == {"n": 16, "c": 8, "h": 225, "w": 225, "k": 64}
    assert padding.conv_shape(16, 3, 225, 225, 60, Precision.INT8) == {"n": 16, "c": 32, "h": 228, "w": 228, "k": 64}
    assert padding.conv_shape(16, 3, 225, 225, 60, Precision.FP32) == {"n": 16, "c": 3, "h": 225, "w": 225, "k": 60}
    # int8 with aligned image and channels still pads channels to 32
    assert padding.conv_shape(4, 64, 56, 56, 40, Precision.INT8) == {"n": 4, "c": 64, "h": 56, "w": 56, "k": 64}


def test_modes_choose_the_shape() -> None:
    listed = {"m": 35, "n": 7133, "k": 2561}
    padded = padding.gemm_shape(**listed, a_t=False, b_t=True, precision=Precision.FP16)
    assert padding.resolve(PadMode.DEEPBENCH, listed, padded) == padded
    assert padding.resolve(PadMode.BOTH, listed, padded) == padded
    assert padding.resolve("none", listed, padded) == listed
    assert padding.changed(listed, padded) == {"m": 40, "n": 7136}


def test_deepbench_sets_have_the_kernels_the_issue_counts() -> None:
    """22 of the 160 fp16 training GEMMs and 8 of the 75 server GEMMs have a dimension DeepBench pads."""

    def padded(kernels, precision):
        return sum(
            1
            for k in kernels
            if padding.gemm_shape(k.m, k.n, k.k, k.a_t, k.b_t, precision) != {"m": k.m, "n": k.n, "k": k.k}
        )

    train = select("train", ["gemm"])
    server = select("inference-server", ["gemm"])
    assert padded(train, Precision.FP16) == 22
    assert padded(server, Precision.FP16) == 8


def test_torch_gemm_records_the_padding_it_ran(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from deepbench.kernels.backends.pytorch.backend import TorchBackend
    from deepbench.kernels.catalog import GemmKernel
    from deepbench.kernels.results import Settings

    kernel = GemmKernel(set="train", index=0, m=35, n=13, k=21, a_t=False, b_t=True)
    backend = TorchBackend(Settings(device="cpu", pad="deepbench"))
    prepared = backend.prepare(kernel, Precision.FP16)
    assert prepared.padding == {"m": 40, "n": 16}
    assert prepared.parts[0].info["blas_call"] == {"transa": "N", "transb": "T", "m": 40, "n": 16, "k": 21}
    raw = backend.prepare_unpadded(kernel, Precision.FP16)
    assert raw is not None and raw.padding == {} and raw.parts[0].info["blas_call"]["n"] == 13
    prepared.parts[0].run()
    assert prepared.parts[0].check().passed
    assert prepared.parts[0].flops == kernel.flops()  # DeepBench's FLOPs: the listed problem's
    del torch
