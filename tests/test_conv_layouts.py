"""Convolutions as DeepBench's conv_bench.cu ran them (issue 43): the cuDNN backend's layout per
precision and --layout's choices, forward-only inference sets (timed for real on the CPU by the
PyTorch backend), the checker's rule for them (new results and results written before), and the
layout penalty in the run table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deepbench.kernels.backends.contract.base import Unsupported
from deepbench.kernels.backends.contract.layout_info import NCHW, NHWC, LayoutInfo
from deepbench.kernels.backends.contract.timed_directions import timed_directions
from deepbench.kernels.backends.contract.unsupported_reasons import could_give
from deepbench.kernels.backends.cudnn.declaration import (
    LAYOUT_CHOICES,
    TYPES,
    WHY_NCHW_FLOAT,
    WHY_NHWC_HALF,
    WHY_NHWC_INT8,
    deepbench_layout,
    layouts,
)
from deepbench.kernels.backends.pytorch.backend import TorchBackend
from deepbench.kernels.catalog import ConvKernel, by_id
from deepbench.kernels.harness.execute import run_item
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import KernelResult, PlanItem, Settings, Status
from deepbench.runner.render.tables import LAYOUT_PENALTY_HEADER, op_table
from deepbench.runner.submission.semantics import check_result

ALL = ("fwd", "bwd_data", "bwd_filter")
INFERENCE = "conv/inference_server/006"  # 480 x 48, one channel, batch 1: milliseconds on a CPU


# DeepBench's layouts (conv_bench.cu): NHWC for half (tensor-core build) and int8, NCHW for float.
@pytest.mark.parametrize(
    ("precision", "layout", "why"),
    [
        (Precision.FP32, NCHW, WHY_NCHW_FLOAT),
        (Precision.TF32, NCHW, WHY_NCHW_FLOAT),
        (Precision.FP16, NHWC, WHY_NHWC_HALF),
        (Precision.BF16, NHWC, WHY_NHWC_HALF),
        (Precision.INT8, NHWC, WHY_NHWC_INT8),
    ],
)
def test_deepbench_layout_per_precision(precision: Precision, layout: str, why: str) -> None:
    assert deepbench_layout(precision) == (layout, why)
    assert layouts(precision, "deepbench") == [(layout, why)]
    other = NCHW if layout == NHWC else NHWC
    both = layouts(precision, "both")
    assert [x for x, _ in both] == [layout, other] and both[0][1] == why and layout in both[1][1]
    assert [x for x, _ in layouts(precision, "nchw")] == [NCHW] and [x for x, _ in layouts(precision, "nhwc")] == [NHWC]


def test_every_cudnn_precision_has_a_layout_rule_and_int8_says_why_not_vect_c() -> None:
    assert set(TYPES) == {Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16, Precision.INT8}
    assert LAYOUT_CHOICES == ("deepbench", "nchw", "nhwc", "both")
    assert "NCHW_VECT_C/INT8x32" in WHY_NHWC_INT8 and "padded to 32" in WHY_NHWC_INT8


def test_int8_in_nchw_is_unsupported_with_a_reason_the_checker_accepts() -> None:
    from deepbench.kernels.backends.cudnn import conv

    settings = Settings(device="cuda", backend_options={"cudnn": {"layout": "nchw"}})
    backend = SimpleNamespace(ctx=None, settings=settings, layout=None)  # refused before it touches a GPU
    with pytest.raises(Unsupported) as exc:
        conv.prepare(backend, by_id()[INFERENCE], Precision.INT8)  # type: ignore[arg-type]
    assert str(exc.value) == conv.INT8_NCHW
    assert could_give("cudnn", str(exc.value), "conv", "int8")


def _run(kernel: ConvKernel) -> KernelResult:
    settings = Settings(mode="fast", threads=1)
    r = run_item(TorchBackend(settings), PlanItem(kernel=kernel, precision="fp32"), settings)
    assert r.status is Status.OK, r.reason
    return r


@pytest.fixture(scope="module")
def inference() -> KernelResult:
    return _run(by_id()[INFERENCE])


@pytest.fixture(scope="module")
def trained() -> KernelResult:
    """The same shape in the training set: every direction."""
    return _run(by_id()[INFERENCE].model_copy(update={"set": "train"}))


def _problems(r: KernelResult) -> list[str]:
    out: list[str] = []
    check_result(r, None, lambda _id, text: out.append(text))
    return out


def test_an_inference_convolution_times_its_forward_pass_only_and_says_so(inference, trained) -> None:
    assert [p.direction for p in inference.parts] == ["fwd"]
    assert inference.info["directions"] == ["fwd"] and "if (!inference)" in inference.info["backward"]
    assert [p.direction for p in trained.parts] == list(ALL) and "directions" not in trained.info
    assert _problems(inference) == [] and _problems(trained) == []


def test_the_checker_refuses_backward_parts_in_a_new_inference_result(inference, trained) -> None:
    forged = inference.model_copy(update={"parts": trained.parts})  # says forward only, holds three
    assert any("'bwd_data', 'bwd_filter'] are not among" in p for p in _problems(forged))


def test_an_inference_result_written_before_keeps_its_backward_parts_but_needs_its_forward(trained) -> None:
    """A result of an older run (every direction timed, nothing said of them) loads and passes; one
    without its forward pass does not."""
    kernel = by_id()[INFERENCE]
    old = trained.model_copy(update={"kernel": kernel, "id": trained.id.replace("/train/", "/inference_server/")})
    assert old.kernel.set == "inference_server" and _problems(old) == []
    no_fwd = old.model_copy(update={"parts": old.parts[1:]})
    assert any("lacks the direction(s) ['fwd']" in p for p in _problems(no_fwd))


def test_timed_directions_per_set() -> None:
    kernel = by_id()[INFERENCE]
    assert timed_directions(kernel, "fp16", "cudnn", "cuda", {"directions": ["fwd"]}) == (frozenset({"fwd"}), ("fwd",))
    assert timed_directions(kernel, "fp16", "cudnn", "cuda", {}) == (frozenset({"fwd"}), ALL)
    train = kernel.model_copy(update={"set": "train"})
    assert timed_directions(train, "fp16", "cudnn", "cuda", {}) == (frozenset(ALL), ALL)


def _both(trained: KernelResult, own: str, other: str, scale: dict[str, float]) -> KernelResult:
    """`trained` as --layout both records it: its parts in `own`, each direction's time in `other`
    beside them (the part's median times `scale`)."""
    parts = tuple(p.model_copy(update={"info": {**p.info, "layout": own}}) for p in trained.parts)
    beside = {
        p.direction: {"time_us": p.measurement.stats.model_copy(update={"median": p.measurement.stats.median * s})}
        for p, s in zip(trained.parts, scale.values(), strict=True)
    }
    return trained.model_copy(
        update={"parts": parts, "info": {**trained.info, "other_layout": {"layout": other, "parts": beside}}}
    )


def test_the_run_table_shows_the_layout_penalty_per_direction(trained) -> None:
    scale = {"fwd": 2.0, "bwd_data": 0.5, "bwd_filter": 1.25}
    nhwc_first = _both(trained, NHWC, NCHW, scale)  # the other (NCHW) runs `scale` times the NHWC time
    nchw_first = _both(trained, NCHW, NHWC, scale)  # the other (NHWC) runs `scale` times the NCHW time
    assert LayoutInfo.model_validate(nhwc_first.info).penalties(nhwc_first.parts) == pytest.approx(scale)
    inverse = {d: 1 / s for d, s in scale.items()}
    assert LayoutInfo.model_validate(nchw_first.info).penalties(nchw_first.parts) == pytest.approx(inverse)
    table = op_table("conv", [nhwc_first, nchw_first])
    headers = [f"{LAYOUT_PENALTY_HEADER} {d}" for d in ALL]
    assert all(h in table.headers for h in headers)
    cells = [[row[table.headers.index(h)] for h in headers] for row in table.rows]
    assert cells == [["2.00", "0.50", "1.25"], ["0.50", "2.00", "0.80"]]
    assert not any(LAYOUT_PENALTY_HEADER in h for h in op_table("conv", [trained]).headers)  # one layout: none


def test_a_second_layout_that_did_not_run_shows_no_penalty(trained) -> None:
    parts = tuple(p.model_copy(update={"info": {**p.info, "layout": NHWC}}) for p in trained.parts)
    note = {"other_layout": {"layout": NCHW, "note": "cuDNN's int8 convolution runs with channels innermost"}}
    r = trained.model_copy(update={"parts": parts, "info": note})
    assert LayoutInfo.model_validate(r.info).penalties(r.parts) == {}
    assert not any(LAYOUT_PENALTY_HEADER in h for h in op_table("conv", [r]).headers)
