"""The catalog holds DeepBench's kernels exactly, in order, with the right costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepbench.kernels import costs
from deepbench.kernels.catalog import OPS, by_id, catalog
from deepbench.kernels.suites import SUITES, SelectionError, parse_where, select, suite_kernels

from .conftest import run_cli


def test_629_kernels_in_deepbench_order(deepbench_data: Path) -> None:
    ours = [k.listing() for k in catalog()]
    theirs = []
    for op in OPS:
        data = json.loads((deepbench_data / "kernels" / f"{op}.json").read_text())
        for set_name, kernels in data["sets"].items():
            theirs += [{"op": op, "set": set_name, **k} for k in kernels]
    assert len(ours) == 629
    assert ours == theirs


@pytest.mark.parametrize("suite", ["train", "inference-server", "inference-device"])
@pytest.mark.parametrize("op", OPS)
def test_list_json_matches_deepbench_data(deepbench_data: Path, suite: str, op: str) -> None:
    data = json.loads((deepbench_data / "kernels" / f"{op}.json").read_text())
    expected = [{"op": op, "set": SUITES[suite], **k} for k in data["sets"].get(SUITES[suite], [])]
    proc = run_cli("deepbench", "list", "--suite", suite, "--ops", op, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert got == expected
    # Field order is DeepBench's, after op and set.
    for line in proc.stdout.splitlines():
        assert list(json.loads(line)) == ["op", "set"] + data["fields"]


def test_every_set_totals_629() -> None:
    assert sum(len(suite_kernels(s)) for s in ("train", "inference-server", "inference-device")) == 629


def test_applications_from_workbooks() -> None:
    assert by_id()["gemm/train/000"].application == "DeepSpeech"
    assert by_id()["conv/inference_device/000"].application == "Resnet"
    assert by_id()["rnn/train/000"].application == "DeepSpeech"


def test_gemm_flops_match_deepbench_v100_figure() -> None:
    # DeepBench's V100 workbook: M=1760 N=16 K=1760 NN, 0.038 ms, 2.6085 TFLOPS.
    k = by_id()["gemm/train/000"]
    assert k.flops() == 2 * 1760 * 16 * 1760
    assert k.flops() / 0.038e-3 / 1e12 == pytest.approx(2.6085052631578947)


def test_conv_flops_and_output_size() -> None:
    k = by_id()["conv/train/000"]  # 700x161, c=1, n=4, k=32, 20x5 filter, stride 2, no padding
    assert (k.out_w, k.out_h) == ((700 - 20) // 2 + 1, (161 - 5) // 2 + 1)
    assert k.flops("fwd") == 2 * 4 * 32 * k.out_h * k.out_w * 1 * 5 * 20
    assert k.flops("bwd_data") == k.flops("bwd_filter") == k.flops("fwd")


def test_rnn_and_sparse_costs() -> None:
    lstm = next(k for k in catalog() if k.op == "rnn" and k.cell == "lstm")
    assert lstm.flops("fwd") == 2 * 4 * lstm.hidden**2 * lstm.batch * lstm.timesteps
    assert lstm.flops("bwd") == 2 * lstm.flops("fwd")
    assert lstm.flops("fwd", input_projection=True) == 2 * lstm.flops("fwd")
    sp = by_id()["sparse_gemm/inference_server/000"]
    assert sp.flops() == pytest.approx(2 * round(7680 * 2560 * 0.05) * 1)
    assert costs.bus_bandwidth_factor(4) == 1.5


def test_smoke_covers_every_op_direction_and_cell() -> None:
    smoke = suite_kernels("smoke")
    assert {k.op for k in smoke} == set(OPS)
    assert {k.cell for k in smoke if k.op == "rnn"} == {"vanilla", "lstm", "gru"}
    gemms = {(k.a_t, k.b_t) for k in smoke if k.op == "gemm"}
    assert len(gemms) >= 3
    # smoke's convolutions are inference ones, forward only since DeepBench's inference was (its list is
    # frozen: a change would leave older smoke bundles' completeness unjudgeable); the train set times all
    assert {d for k in smoke if k.op == "conv" for d in k.timed()} == {"fwd"}


def test_inference_convolutions_are_forward_only_and_training_keeps_every_direction() -> None:
    """DeepBench's conv_bench.cu guarded the backward passes with `if (!inference)`."""
    convs = [k for k in catalog() if k.op == "conv"]
    assert {k.set for k in convs} == {"train", "inference_server", "inference_device"}
    for k in convs:
        assert k.timed() == (("fwd",) if k.set != "train" else ("fwd", "bwd_data", "bwd_filter")), k.id
        assert k.forward_only is (k.set != "train")
    others = [k for k in catalog() if k.op != "conv"]
    assert all(k.timed() == k.DIRECTIONS and not k.forward_only for k in others)


def test_selection_filters_and_limits() -> None:
    assert all(k.m == 1760 for k in select("train", ["gemm"], parse_where(["m=1760"])))
    assert len(select("train", ["gemm"], parse_where(["m=1760"]))) == 11
    assert [k.op for k in select("train", limit=1)] == ["gemm", "conv", "rnn", "all_reduce"]
    lstms = select("train", None, parse_where(["cell=lstm,hidden<=512"]))
    assert all(k.cell == "lstm" and k.hidden <= 512 for k in lstms)
    with pytest.raises(SelectionError, match="choose from"):
        parse_where(["q=1"])
    with pytest.raises(SelectionError, match="malformed"):
        parse_where(["m 1760"])
    with pytest.raises(SelectionError, match="bad value"):
        parse_where(["m=abc"])


def test_applications_are_what_the_workbooks_say(deepbench_data: Path) -> None:
    """kernels/data/applications.json is exactly what the maintainer tool derives from DeepBench's kernel workbooks."""
    import importlib.util

    from .conftest import REPO

    spec = importlib.util.spec_from_file_location("import_deepbench", REPO / "tests" / "tools" / "import_deepbench.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    shipped = (REPO / "kernels" / "data" / "applications.json").read_text()
    assert json.dumps(tool.label(deepbench_data), indent=1) + "\n" == shipped
