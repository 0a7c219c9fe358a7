"""Operator datasets of real models (issue 9): definitions, extraction, suites, reports.

Published figures and where they come from:
- Parameter counts: torchvision's model documentation (ResNet50_Weights.IMAGENET1K_V1 25,557,032;
  VGG16_Weights 138,357,544; DenseNet121_Weights 7,978,856) and Hugging Face's model cards
  (bert-base-uncased 109,482,240 = BERT-base's "110M" of Devlin et al. 2019, Table/section 3;
  gpt2 124,439,808; Meta-Llama-3-8B 8,030,261,248 = "8B").
- Multiply-accumulates per 224x224 image: torchvision's documentation lists "GFLOPS" 4.09
  (ResNet-50), 15.47 (VGG-16), 2.83 (DenseNet-121); these are multiply-adds (fvcore's
  convention), so FLOPs are twice that at 2 FLOPs per multiply-add (kernels/costs.py).
- Transformer encoder GEMMs: Kaplan et al. 2020 ("Scaling Laws for Neural Language Models",
  Table 1): N = 2 d_model n_layer (2 d_attn + d_ff) = 12 n_layer d_model^2 non-embedding
  parameters, and a forward pass costs 2N FLOPs per token in those matrix products.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from deepbench.kernels.catalog import ConvKernel, GemmKernel, RnnKernel
from deepbench.kernels.models import MODELS
from deepbench.kernels.models.dataset import DATASET_SCHEMA, OperatorDataset
from deepbench.kernels.models.extract import example_input, extract
from deepbench.kernels.models.language import Llama
from deepbench.kernels.models.suite import dataset_kernels, load_dataset
from deepbench.kernels.results import Status
from deepbench.kernels.results_file import read_results
from deepbench.runner.analysis.model_report import model_reports
from deepbench.runner.cli import main, run_main

from .conftest import run_cli

PUBLISHED_PARAMS = {
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "densenet121": 7_978_856,
    "bert-base": 109_482_240,
    "gpt2": 124_439_808,
}
PUBLISHED_GMACS = {"resnet50": 4.09, "vgg16": 15.47, "densenet121": 2.83}  # torchvision docs, per 224x224 image
LLAMA3_8B_PARAMS = 8_030_261_248
FLOPS_PER_MAC = 2
TOLERANCE = 0.02  # "within a few percent": the published figures are rounded to 3 digits


@pytest.fixture(scope="module")
def datasets() -> dict[str, OperatorDataset]:
    return {name: extract(name) for name in MODELS}


def params(op) -> dict:
    return dict(op.params)


def test_every_model_extracts_with_schema_and_roundtrips(datasets, tmp_path: Path) -> None:
    for name, ds in datasets.items():
        assert ds.schema_version == DATASET_SCHEMA and ds.model == name and ds.operators
        assert ds.total_flops() > 0 and all(o.count >= 1 for o in ds.operators)
        keys = {o.model_dump_json(exclude={"count"}) for o in ds.operators}
        assert len(keys) == len(ds.operators), f"{name}: distinct operators are merged"
        path = tmp_path / f"{name}.json"
        ds.save(path)
        assert OperatorDataset.load(path) == ds


@pytest.mark.parametrize("name", list(PUBLISHED_PARAMS))
def test_parameter_counts_match_published(datasets, name: str) -> None:
    assert datasets[name].parameters == PUBLISHED_PARAMS[name]


def test_llama_layer_makes_the_published_8b_model() -> None:
    with torch.device("meta"):
        model = Llama()
    assert sum(p.numel() for p in model.parameters()) == LLAMA3_8B_PARAMS


@pytest.mark.parametrize("name", list(PUBLISHED_GMACS))
def test_vision_flops_match_published(datasets, name: str) -> None:
    published = PUBLISHED_GMACS[name] * 1e9 * FLOPS_PER_MAC
    assert datasets[name].total_flops() == pytest.approx(published, rel=TOLERANCE)


@pytest.mark.parametrize("name", list(MODELS))
def test_flops_agree_with_torch_flop_counter(datasets, name: str) -> None:
    """An independent count: PyTorch's own FlopCounterMode on the decomposed operators."""
    ds, info = datasets[name], MODELS[name]
    with torch.device("meta"):
        model = info.build()().eval()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(example_input(info, ds.batch, ds.seq))
    assert ds.total_flops() == pytest.approx(counter.get_total_flops(), rel=1e-9)


def test_resnet50_known_layers(datasets) -> None:
    ds = datasets["resnet50"]
    first = ds.operators[0]
    assert first.type == "conv" and first.count == 1
    assert {k: params(first)[k] for k in ("n", "c", "h", "w", "k", "r", "s", "stride_h", "pad_h")} == dict(
        n=1, c=3, h=224, w=224, k=64, r=7, s=7, stride_h=2, pad_h=3
    )
    assert (params(first)["out_h"], params(first)["out_w"]) == (112, 112)
    (fc,) = ds.of_type("gemm")
    assert {k: params(fc)[k] for k in ("m", "n", "k")} == dict(m=1000, n=1, k=2048)
    assert ds.calls("conv") == 53 and ds.calls("batch_norm") == 53  # 49 in the blocks + 4 shortcuts
    assert ds.calls("pooling") == 2 and ds.calls("elementwise") == 16  # max/avg pool; 16 residual adds
    assert ds.calls("other") == 0


def test_batch_scales_shapes_and_flops(datasets) -> None:
    ds8 = extract("resnet50", batch=8)
    assert params(ds8.operators[0])["n"] == 8 and ds8.input_shape == (8, 3, 224, 224)
    assert ds8.total_flops() == pytest.approx(8 * datasets["resnet50"].total_flops())
    bert = extract("bert-base", batch=2, seq=384)
    assert {params(o)["n"] for o in bert.of_type("gemm")} == {2 * 384, 2}  # tokens; the pooler sees [CLS] only


def test_bert_base_known_layers_and_gemm_flops(datasets) -> None:
    ds = datasets["bert-base"]
    layers, hidden, ffn, heads, seq = 12, 768, 3072, 12, ds.seq
    gemms = {(params(o)["m"], params(o)["k"], params(o)["n"]): o.count for o in ds.of_type("gemm")}
    assert gemms[(hidden, hidden, seq)] == 4 * layers  # Q, K, V, output projection
    assert gemms[(ffn, hidden, seq)] == layers and gemms[(hidden, ffn, seq)] == layers
    assert all(params(o)["a_t"] and not params(o)["b_t"] for o in ds.of_type("gemm"))  # as PyTorch's linear calls BLAS
    (attn,) = ds.of_type("attention")
    assert attn.count == layers and params(attn)["heads"] == heads and params(attn)["head_dim"] == hidden // heads
    assert not params(attn)["causal"]
    assert ds.calls("layer_norm") == 2 * layers + 1 and ds.calls("embedding") == 3
    encoder = sum(o.total_flops for o in ds.of_type("gemm") if params(o)["n"] == seq)
    kaplan_n = 12 * layers * hidden**2
    assert encoder == pytest.approx(2 * kaplan_n * seq, rel=TOLERANCE)


def test_decoder_models_known_layers(datasets) -> None:
    gpt2 = datasets["gpt2"]
    head = max(gpt2.of_type("gemm"), key=lambda o: params(o)["m"])
    assert (params(head)["m"], params(head)["k"]) == (50257, 768)
    assert all(params(o)["causal"] for o in gpt2.of_type("attention"))
    llama = datasets["llama3-8b-layer"]
    (attn,) = llama.of_type("attention")
    assert (params(attn)["heads"], params(attn)["kv_heads"], params(attn)["head_dim"]) == (32, 8, 128)
    gemms = sorted((params(o)["m"], params(o)["k"], o.count) for o in llama.of_type("gemm"))
    assert gemms == [(1024, 4096, 2), (4096, 4096, 2), (4096, 14336, 1), (14336, 4096, 2)]
    assert llama.calls("rms_norm") == 2 and llama.calls("activation") == 1


def test_lstm_lm_runs_as_rnn_kernels(datasets) -> None:
    ds = datasets["lstm-lm"]
    (rnn,) = ds.of_type("rnn")
    assert {k: params(rnn)[k] for k in ("cell", "hidden", "layers", "timesteps", "batch")} == dict(
        cell="lstm", hidden=650, layers=2, timesteps=35, batch=1
    )
    kernels, _ = dataset_kernels(ds)
    (lstm,) = [k for k in kernels if isinstance(k, RnnKernel)]
    assert (lstm.hidden, lstm.timesteps, lstm.cell, lstm.count) == (650, 35, "lstm", 2)


def test_suite_kernels_are_distinct_with_counts(datasets) -> None:
    ds = datasets["resnet50"]
    kernels, unmapped = dataset_kernels(ds)
    convs = [k for k in kernels if isinstance(k, ConvKernel)]
    assert len({k.id for k in kernels}) == len(kernels) and len(set(convs)) == len(convs)
    assert sum(k.count for k in convs) == ds.calls("conv")
    assert all(k.set == "model" and k.application == "resnet50" for k in kernels)
    assert sum(k.flops() * k.count for k in kernels) == pytest.approx(ds.total_flops())
    assert unmapped == []  # the 16 residual adds are ElementwiseKernels
    adds = [k for k in kernels if k.op == "elementwise"]
    assert sum(k.count for k in adds) == 16 and {k.function for k in adds} == {"add"}
    assert all(k.a_elements == k.b_elements == k.elements for k in adds)
    assert sum(k.count for k in kernels) == ds.calls()
    (fc,) = [k for k in kernels if isinstance(k, GemmKernel)]
    assert (fc.m, fc.n, fc.k, fc.a_t, fc.b_t, fc.count) == (1000, 1, 2048, True, False, 1)


def test_dataset_file_as_suite(tmp_path: Path, datasets) -> None:
    path = tmp_path / "bert.json"
    datasets["bert-base"].save(path)
    assert load_dataset(str(path)) == datasets["bert-base"]
    with pytest.raises(ValueError, match="extracted with --seq 128"):
        load_dataset(str(path), seq=64)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": "deepbench.operators/0"}))
    with pytest.raises(ValueError, match="not an operator dataset"):
        load_dataset(str(bad))


def test_cli_extract_list_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "r50.json"
    proc = run_cli("deepbench", "models", "extract", "resnet50", "--batch", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    ds = OperatorDataset.load(out)
    assert ds.batch == 2 and "batch_norm kernel" in proc.stdout and "elementwise kernel" in proc.stdout
    assert "no kernel type yet" not in proc.stdout  # ResNet-50's residual adds are mapped too
    assert main(["models", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in MODELS)
    # user mistakes: one line, exit 2 (in-process: the same entry points, without a torch import per case)
    for args in (
        ["models", "extract", "alexnet"],
        ["models", "extract", "bert-base", "--seq", "0"],
        ["models", "extract", "resnet50", "--seq", "8"],
        ["models", "report", str(tmp_path)],
    ):
        assert main(args) == 2, args
        assert "error:" in capsys.readouterr().err
    for args in (
        ["--suite", "train", "--batch", "4"],
        ["--suite", "model:alexnet"],
        ["--suite", "model:resnet50", "--batch", "0"],
        ["--suite", f"model:{out}", "--batch", "1"],
    ):
        assert run_main(["--local", "--out", str(tmp_path / "x"), *args]) == 2, args
        assert "error:" in capsys.readouterr().err


@pytest.mark.slow
def test_model_suite_runs_and_reports(tmp_path: Path) -> None:
    """The issue's acceptance runs on the CPU: every kernel checked, then the operator report."""
    for suite, op_types in (
        ("model:resnet50", {"conv", "gemm", "batch_norm", "activation", "pooling", "elementwise"}),
        ("model:bert-base", {"gemm", "attention", "norm", "activation", "embedding", "elementwise"}),
    ):
        out = tmp_path / suite.split(":")[1]
        proc = run_cli(
            "deepbench-run",
            "--local",
            "--suite",
            suite,
            "--batch",
            "1",
            "--fast",
            "--time-cap",
            "0.05",
            "--quiet",
            "--out",
            str(out),
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        results = read_results(out / "results.jsonl")
        assert results and all(r.status is Status.OK and r.check.passed for r in results)
        (whole,) = [r for r in results if r.kernel.op == "model"]  # the whole model (tests/test_model_level.py)
        results = [r for r in results if r is not whole]
        (report,) = model_reports(results)
        assert {t.op for t in report.types} == op_types
        assert sum(t.share for t in report.types) == pytest.approx(1.0)
        assert sum(t.calls for t in report.types) == sum(r.kernel.count for r in results)
        assert report.total_us == pytest.approx(
            sum(
                r.kernel.count * next(p.measurement.stats.median for p in r.parts if p.direction == "fwd")
                for r in results
            )
        )
        shown = run_cli("deepbench", "models", "report", str(out))
        assert shown.returncode == 0 and "share" in shown.stdout, shown.stderr
        as_json = json.loads(run_cli("deepbench", "models", "report", str(out), "--format", "json").stdout)
        assert as_json[0]["model"] == suite.split(":")[1]
