"""fp16acc16, DeepBench's own half GEMM call (gemm_bench.cu: cublasGemmEx with CUDA_R_16F compute):
a precision of its own, parsed and recorded as float16 accumulate, made by the cuBLAS backend only
(its CALLS entry and math mode), refused with a reason the checker accepts by every other backend
(a real CPU run), offered only when asked for, and flagged by `compare --any-precision` beside fp16.
Its tolerance is tested in test_tolerances.py against an emulated fp16-accumulate product."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.backends import BACKENDS, declaration_of
from deepbench.kernels.backends.contract.base import Unsupported
from deepbench.kernels.backends.contract.declared_precisions import refuse_undeclared
from deepbench.kernels.backends.contract.unsupported_reasons import could_give
from deepbench.kernels.backends.cublas import gemm
from deepbench.kernels.backends.cublas.declaration import CALLS, MATH_MODES, STRICT_MATH
from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import (
    DECLARED_ONLY,
    INPUT_BYTES,
    OUTPUT_BYTES,
    PRECISIONS,
    Precision,
    parse_precisions,
)
from deepbench.kernels.results_file import read_results
from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.like_for_like import accumulate_warnings, notes
from deepbench.runner.analysis.sources import load_run
from deepbench.runner.launch.running.planning import plan_items
from deepbench.runner.platforms import get_platform
from deepbench.runner.submission.checker import check_bundle

from .conftest import REPO, local_bundle, run_cli

H100_TRAIN = REPO / "runner" / "published" / "nvidia-h100" / "train"


def test_parsed_and_described_as_what_it_is() -> None:
    assert parse_precisions("fp16, fp16acc16") == [Precision.FP16, Precision.FP16ACC16]
    info = PRECISIONS[Precision.FP16ACC16]
    assert (info.inputs, info.accumulate, info.output) == ("float16", "float16", "float16")
    assert "gemm_bench.cu" in info.description and "CUDA_R_16F compute" in info.description
    assert PRECISIONS[Precision.FP16].accumulate == "float32"  # "fp16" never means fp16 accumulate
    assert INPUT_BYTES[Precision.FP16ACC16] == OUTPUT_BYTES[Precision.FP16ACC16] == 2
    with pytest.raises(ValueError, match="fp16acc16"):  # the choices an unknown name is told
        parse_precisions("fp16acc32")


def test_cublas_makes_deepbenchs_half_call() -> None:
    """The cuBLAS backend declares fp16acc16 as gemm_bench.cu's call: half A/B/C, fp16 compute, half
    alpha and beta, on a handle in cuBLAS's default math (no reduced-precision ban: the compute is
    reduced precision); fp16 keeps fp32 compute on the strict handle."""
    assert CALLS[Precision.FP16ACC16] == ("CUDA_R_16F", "CUDA_R_16F", "COMPUTE_16F")
    assert CALLS[Precision.FP16] == ("CUDA_R_16F", "CUDA_R_16F", "COMPUTE_32F")
    assert gemm.SCALAR[CALLS[Precision.FP16ACC16][2]] is np.float16
    assert gemm.math_mode_text(MATH_MODES[Precision.FP16ACC16]) == "CUBLAS_DEFAULT_MATH"
    assert gemm.math_mode_text(MATH_MODES[Precision.FP16]) == (
        "CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION"
    )
    assert all(MATH_MODES[p] == STRICT_MATH for p in CALLS if p is not Precision.FP16ACC16)
    assert Precision.FP16ACC16 in declaration_of("cublas").precisions
    assert gemm.OUTPUT_DTYPE[Precision.FP16ACC16] == gemm.OUTPUT_DTYPE[Precision.FP16]


@pytest.mark.parametrize("backend", sorted(set(BACKENDS) - {"cublas"}))
def test_every_other_backend_refuses_it_with_a_reason_the_checker_accepts(backend: str) -> None:
    assert Precision.FP16ACC16 in DECLARED_ONLY
    with pytest.raises(Unsupported) as refused:
        refuse_undeclared(Precision.FP16ACC16, backend)
    reason = str(refused.value)
    assert f"the {backend} backend does not make" in reason and "backends that do: cublas" in reason
    assert could_give(backend, reason, "gemm", "fp16acc16")
    refuse_undeclared(Precision.FP16, backend)  # a storage precision is each backend's own to refuse or run
    refuse_undeclared(Precision.FP16ACC16, "cublas")  # declared: made


def test_offered_only_when_asked_for() -> None:
    """No platform runs fp16acc16 by default; --precision fp16acc16 plans it for the GEMM sets."""
    gemms = [by_id()["gemm/train/000"], by_id()["gemm/inference_server/000"]]
    for platform in ("nvidia", "cpu"):
        defaults = {i.precision for i in plan_items(gemms, None, get_platform(platform))}
        assert Precision.FP16ACC16 not in defaults
    asked = plan_items(gemms, ["fp16acc16"], get_platform("nvidia"))
    assert [(i.kernel.set, i.precision) for i in asked] == [
        ("train", Precision.FP16ACC16),
        ("inference_server", Precision.FP16ACC16),
    ]


def test_a_cpu_run_reports_it_unsupported_and_the_checker_accepts_the_run(tmp_path: Path) -> None:
    """A real CPU run (neither PyTorch nor MKL makes an fp16-accumulate GEMM): every result unsupported with the
    reason, exit 0 as for any run whose kernels are ok or unsupported, and `deepbench check` accepts it."""
    bundle = local_bundle(
        tmp_path, "--platform", "cpu", "--suite", "train", "--ops", "gemm", "--precision", "fp16acc16", "--limit", "2"
    )
    results = read_results(bundle / "results.jsonl")
    assert len(results) == 2
    for r in results:
        assert r.status.value == "unsupported" and r.precision.accumulate == "float16"
        assert "fp16acc16 is one library call's arithmetic" in r.reason and f"{r.backend} backend" in r.reason
    report = check_bundle(bundle, allow_modified=True)  # a test tree may hold uncommitted changes
    assert report.ok, [str(p) for p in report.problems]
    proc = run_cli("deepbench", "check", str(bundle), "--allow-modified")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _fp16_of(source, label: str, precision: str = "fp16"):
    """The source's fp16 kernels, recorded as `precision` (only the precision is compared here)."""
    entries = tuple(dataclasses.replace(e, precision=precision) for e in source.entries if e.precision == "fp16")
    return dataclasses.replace(source, label=label, entries=entries)


def test_compare_pairs_by_precision_and_flags_the_accumulate_type_across_precisions() -> None:
    run = _fp16_of(load_run(H100_TRAIN), "acc32")
    other = _fp16_of(run, "acc16", "fp16acc16")
    by_precision = compare([run, other])
    assert other.entries and all(row.others[0] is None for row in by_precision.rows)  # fp16 vs fp16acc16: unpaired
    assert accumulate_warnings(by_precision) == []
    across = compare([run, other], any_precision=True)
    said = accumulate_warnings(across)
    assert len(said) == 1 and "acc16's fp16acc16 accumulates in float16" in said[0]
    assert "acc32's fp16 accumulates in float32" in said[0] and "not like with like" in said[0]
    assert f"warning: {said[0]}" in notes(across)


def test_published_references_keep_their_stated_precision() -> None:
    """DeepBench's sheets state 32-bit addition for their half figures: the references stay fp16
    (docs/measuring.md says why), never fp16acc16."""
    from deepbench.runner.analysis.sources import load_source

    ref = load_source("ref:V100", "train")
    gemms = [e for e in ref.entries if e.kernel.op == "gemm" and e.precision.startswith("fp16")]
    assert gemms and {e.precision for e in gemms} == {"fp16"}
    assert all("32 bit addition" in e.precision_text for e in gemms), {e.precision_text for e in gemms}
