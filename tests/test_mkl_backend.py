"""The mkl backend on real MKL calls (the `mkl` wheel's libmkl_rt; skipped with one line where it is missing):
every precision runs and passes its check or is unsupported naming the instructions it lacks, MKL receives
DeepBench's leading dimensions, packed and direct calls agree, a spoiled output fails its check over several
seeds, the sparse product runs with its dense twin, and a smoke run ends in a bundle `deepbench check` passes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.backends import declaration_of, load_backend
from deepbench.kernels.backends.contract.base import Prepared, Unsupported
from deepbench.kernels.backends.contract.declaration import BackendOptionsError
from deepbench.kernels.backends.contract.unsupported_reasons import could_give
from deepbench.kernels.backends.cpu.runtime import physical_cores
from deepbench.kernels.backends.cpu.wheel_libraries import wheel_library_dirs
from deepbench.kernels.backends.mkl import binding
from deepbench.kernels.backends.mkl.cpu_isa import CpuIsa, parse, this_cpu
from deepbench.kernels.backends.mkl.declaration import CALLS, MklOptions, MklPartInfo
from deepbench.kernels.backends.mkl.operands import fix_ld, from_bf16_bits, to_bf16_bits
from deepbench.kernels.backends.onednn import binding as onednn_binding
from deepbench.kernels.catalog import GemmKernel, SparseGemmKernel, by_id
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Settings, Status
from deepbench.kernels.results_file import read_results

from .conftest import local_bundle, run_cli

try:
    binding.load()
    MISSING = ""
except binding.MklMissing as exc:
    MISSING = str(exc)
needs_mkl = pytest.mark.skipif(bool(MISSING), reason=f"needs MKL ({MISSING}): pip install 'deepbench[intel]'")

RUN = (Precision.FP32, Precision.INT8, Precision.BF16, Precision.FP16)
LAYOUTS = [(False, False), (True, False), (False, True), (True, True)]
SEEDS = range(4)
SMALL = dict(set="train", index=0, m=96, n=40, k=200)  # a float64 reference GEMM (under REFERENCE_MAX_MACS)
LARGE = "gemm/train/063"  # 7680 x 128 x 2560: Freivalds' check
SPARSE = "sparse_gemm/inference_device/000"  # 7680 x 1 x 2560 at 95%: mkl_sparse_s_mv
SPARSE_MM = dict(set="inference_server", index=0, m=300, n=24, k=200, sparsity=0.9)


def backend(**options: str) -> object:
    return load_backend("mkl", Settings(threads=1, backend_options={"mkl": options} if options else {}))


def run_part(prepared: Prepared):
    part = prepared.parts[0]
    part.run()
    return part


def spoil(out: np.ndarray) -> None:
    """What a call that skipped a column of C leaves (C^T's first row: C's first column)."""
    out[0] = 0


@needs_mkl
@pytest.mark.parametrize("precision", RUN, ids=lambda p: p.value)
@pytest.mark.parametrize("a_t,b_t", LAYOUTS)
def test_every_precision_runs_and_passes_or_names_the_missing_instructions(precision, a_t, b_t) -> None:
    kernel = GemmKernel(**SMALL, a_t=a_t, b_t=b_t)
    be = backend()
    if this_cpu().lacks(CALLS[precision].isa):
        with pytest.raises(Unsupported) as exc:
            be.prepare(kernel, precision)
        assert all(flag in str(exc.value) for flag in CALLS[precision].isa), exc.value
        return
    part = run_part(be.prepare(kernel, precision))
    check = part.check()
    assert check.passed, check
    if precision is Precision.INT8:
        assert check.method == "exact-int" and check.error == 0.0
    info = MklPartInfo.model_validate(part.info)
    assert info.call == CALLS[precision].direct and info.mode == "direct"
    assert (info.blas_call.transa, info.blas_call.transb) == ("T" if a_t else "N", "T" if b_t else "N")
    assert info.mkl.version.startswith("Intel(R) oneAPI Math Kernel Library") and info.mkl.isa
    assert info.mkl.cpu_vendor == this_cpu().vendor and info.mkl.threads == 1


def test_a_cpu_without_the_instructions_is_unsupported_with_a_reason_check_accepts() -> None:
    epyc = parse("vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763\nflags\t\t: fpu sse2 avx avx2 fma\n")
    assert epyc.vendor == "AMD (AuthenticAMD)" and epyc.lacks(CALLS[Precision.BF16].isa)
    if MISSING:
        pytest.skip(f"needs MKL ({MISSING})")
    be = backend()
    be.context.cpu = epyc
    for precision in (Precision.BF16, Precision.FP16):
        with pytest.raises(Unsupported) as exc:
            be.prepare(GemmKernel(**SMALL, a_t=False, b_t=False), precision)
        reason = str(exc.value)
        assert "AMD EPYC 7763" in reason and " or ".join(CALLS[precision].isa) in reason
        assert could_give("mkl", reason, "gemm", precision.value), reason


@needs_mkl
@pytest.mark.parametrize("precision", [Precision.TF32, Precision.FP8])
def test_a_precision_mkl_has_no_gemm_for_is_unsupported(precision) -> None:
    with pytest.raises(Unsupported) as exc:
        backend().prepare(GemmKernel(**SMALL, a_t=False, b_t=False), precision)
    assert could_give("mkl", str(exc.value), "gemm", precision.value), exc.value


@needs_mkl
@pytest.mark.parametrize(
    "kid,lds",
    [
        ("gemm/train/000", (1808, 1808, 1808)),  # N N 1760 x 16 x 1760: FIX_LD(1760) = 14 * 128 + 16
        ("gemm/train/020", (1808, 1808, 1808)),  # T N
        ("gemm/train/138", (528, 144, 528)),  # N T 512 x 16 x 512: ldb = FIX_LD(n = 16) = 144
        ("gemm/inference_device/003", (144, 1296, 144)),  # N N 64 x 1 x 1216
    ],
)
@pytest.mark.parametrize("precision", [Precision.FP32, Precision.INT8])
def test_mkl_receives_deepbenchs_leading_dimensions(kid, lds, precision) -> None:
    kernel = by_id()[kid]
    info = MklPartInfo.model_validate(backend().prepare(kernel, precision).parts[0].info)
    call = info.blas_call
    assert (call.m, call.n, call.k) == (kernel.m, kernel.n, kernel.k)  # no dimension padded, int8 included
    assert (call.lda, call.ldb, call.ldc) == lds
    assert call.layout == "CblasColMajor" and call.leading_dimensions.startswith("deepbench")
    stored = (kernel.k if kernel.a_t else kernel.m, kernel.n if kernel.b_t else kernel.k, kernel.m)
    assert lds == tuple(fix_ld(rows) for rows in stored)
    tight = run_part(load_backend("mkl", Settings(threads=1, pad="none")).prepare(kernel, precision))
    assert (tight.info["blas_call"]["lda"], tight.info["blas_call"]["ldb"]) == stored[:2]  # --pad none: tight
    assert tight.info["blas_call"]["ldc"] == stored[2] and tight.check().passed


@needs_mkl
@pytest.mark.parametrize("precision", RUN, ids=lambda p: p.value)
def test_packed_and_direct_calls_both_pass_and_agree(precision) -> None:
    if this_cpu().lacks(CALLS[precision].isa):
        pytest.skip(f"this CPU lacks {CALLS[precision].isa}: the precision is unsupported (tested above)")
    kernel = GemmKernel(**SMALL, a_t=True, b_t=False)
    direct = run_part(backend().prepare(kernel, precision))
    packed = run_part(backend(gemm="packed").prepare(kernel, precision))
    assert direct.check().passed and packed.check().passed
    assert packed.info["call"] == f"{CALLS[precision].pack} (A and B) + {CALLS[precision].compute}"
    assert packed.info["mode"] == "packed"
    out_direct = direct.output[:, : kernel.m].astype(np.float64)  # the same seed: the same operands
    out_packed = packed.output[:, : kernel.m].astype(np.float64)
    if precision is Precision.INT8:
        assert np.array_equal(out_direct, out_packed)
    else:
        assert np.linalg.norm(out_direct - out_packed) <= 1e-5 * np.linalg.norm(out_direct)


@needs_mkl
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("precision", [Precision.FP32, Precision.INT8])
@pytest.mark.parametrize("size", ["reference", "freivalds"])
def test_a_spoiled_output_fails_the_check(seed, precision, size) -> None:
    kernel = GemmKernel(**SMALL, a_t=False, b_t=True) if size == "reference" else by_id()[LARGE]
    be = load_backend("mkl", Settings(threads=1, seed=seed))
    part = run_part(be.prepare(kernel, precision))
    assert part.check().passed
    out = part.output[:, : kernel.m]
    spoil(out)
    assert not part.check().passed
    if precision is Precision.FP32:  # float32 arithmetic off by 1e-3 (tf32's size of error) fails too
        part.run()
        out *= np.float32(1.001)
        assert not part.check().passed


def test_bf16_rounding_is_to_nearest_even() -> None:
    values = np.array([1.0, 1.00390625, 1.005859375, -2.0e-3, 3.0e38], dtype=np.float32)
    rounded = from_bf16_bits(to_bf16_bits(values))
    assert rounded[0] == 1.0 and rounded[1] == 1.0  # halfway 1 + 2^-8: to the even neighbour, 1
    assert rounded[2] == np.float32(1.0078125)  # above halfway: up
    assert np.all(np.abs(rounded - values) <= np.abs(values) * 2.0**-8)


@needs_mkl
@pytest.mark.parametrize("a_t,b_t", LAYOUTS)
def test_sparse_products_pass_and_a_spoiled_one_fails(a_t, b_t) -> None:
    part = run_part(backend().prepare(SparseGemmKernel(**SPARSE_MM, a_t=a_t, b_t=b_t), Precision.FP32))
    assert part.check().passed and part.info["call"] == "mkl_sparse_s_mm"
    call = part.info["sparse_call"]
    assert call["nnz"] < 0.2 * SPARSE_MM["m"] * SPARSE_MM["k"] and call["expected_calls"] == 10
    part.output[...] = 0
    assert not part.check().passed


@needs_mkl
def test_sparse_gemm_has_its_dense_twin_on_mkl() -> None:
    be = backend()
    kernel = by_id()[SPARSE]
    prepared = be.prepare(kernel, Precision.FP32)
    part = run_part(prepared)
    assert part.check().passed and part.info["call"] == "mkl_sparse_s_mv"  # n = 1: DeepBench's vector product
    assert declaration_of("mkl").dense_backend == "mkl"
    from deepbench.kernels.harness.execute import stop_rule

    dense = prepared.after(be, stop_rule(Settings(threads=1, mode="fast", time_cap_s=0.05)))
    assert dense["dense_check"]["passed"] and dense["dense_time_us"]["median"] > 0
    assert (dense["dense_call"]["lda"], dense["dense_call"]["ldc"]) == (fix_ld(kernel.m), fix_ld(kernel.m))
    with pytest.raises(Unsupported) as exc:
        be.prepare(kernel, Precision.BF16)
    assert could_give("mkl", str(exc.value), "sparse_gemm", "bf16")


@needs_mkl
def test_threads_default_to_the_physical_cores_and_mkl_is_told(monkeypatch) -> None:
    from deepbench.kernels import noise

    monkeypatch.setattr(noise.CpuWindow, "others_cores", lambda self: 0.0)  # a quiet machine: every core free
    default = load_backend("mkl", Settings())
    assert default.threads == physical_cores() == default.context.runtime.threads
    monkeypatch.setattr(noise.CpuWindow, "others_cores", lambda self: 1.0)  # one core kept busy by others
    if physical_cores() > 1:
        assert load_backend("mkl", Settings()).threads == physical_cores() - 1
    one = load_backend("mkl", Settings(threads=1))
    assert one.context.runtime.threads == 1 == one.device_facts()["mkl_threads"]
    assert one.device_facts()["cpu_vendor"] == this_cpu().vendor
    assert "mkl" in one.library_versions()


def test_without_the_library_every_kernel_is_unsupported_with_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(binding, "LIBRARY", "libmkl_rt_absent.so.3")
    binding.load.cache_clear()
    try:
        be = load_backend("mkl", Settings(threads=1))
        kernel = GemmKernel(**SMALL, a_t=False, b_t=False)
        assert not be.covers(kernel, Precision.FP32)
        with pytest.raises(Unsupported) as exc:
            be.prepare(kernel, Precision.FP32)
    finally:
        binding.load.cache_clear()
    reason = str(exc.value)
    assert "\n" not in reason and "libmkl_rt_absent.so.3 is not installed" in reason
    assert reason.endswith("pip install 'deepbench[intel]'")
    assert could_give("mkl", reason, "gemm", "fp32")


def test_both_intel_bindings_look_in_the_environment_then_its_base(monkeypatch, tmp_path: Path) -> None:
    """A venv's lib folder first, then its base Python's (where --system-site-packages finds the wheels), once each:
    MKL and oneDNN read the same list (cpu/wheel_libraries.py)."""
    venv, base = tmp_path / "venv", tmp_path / "base"
    for prefix in (venv, base):
        (prefix / "lib").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", str(base))
    assert wheel_library_dirs() == [venv / "lib", base / "lib"]
    assert onednn_binding.library_folder() == venv / "lib"  # libdnnl in neither: where a wheel would put it
    (base / "lib" / onednn_binding.LIBRARY).touch()
    assert onednn_binding.library_folder() == base / "lib"
    monkeypatch.setattr(sys, "base_prefix", str(venv))
    assert wheel_library_dirs() == [venv / "lib"]


def test_the_gemm_option_round_trips_and_a_wrong_one_is_refused() -> None:
    declared = declaration_of("mkl")
    assert declared.flag_defaults() == MklOptions() and declared.to_args(MklOptions()) == []
    assert declared.to_args(MklOptions(gemm="packed")) == ["--mkl-gemm", "packed"]
    assert declared.options_of(Settings(backend_options={"mkl": {"gemm": "packed"}})).gemm == "packed"
    with pytest.raises(BackendOptionsError, match=r"backend_options\.mkl\.gemm"):
        declared.options_of(Settings(backend_options={"mkl": {"gemm": "sideways"}}))


def test_cpuinfo_is_read_for_vendor_and_flags() -> None:
    xeon = parse("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\nflags\t\t: avx512f amx_bf16\n")
    assert xeon == CpuIsa("Intel (GenuineIntel)", "Xeon", frozenset({"avx512f", "amx_bf16"}))
    assert not xeon.lacks(CALLS[Precision.BF16].isa) and xeon.lacks(CALLS[Precision.FP16].isa)
    assert not xeon.lacks(CALLS[Precision.FP32].isa)  # fp32 needs no flag


@needs_mkl
@pytest.mark.slow
def test_smoke_runs_end_to_end_and_its_bundle_passes_check(tmp_path: Path) -> None:
    args = ("--backend", "mkl", "--suite", "smoke", "--precision", "fp32,int8", "--fast", "--threads", "1")
    bundle = local_bundle(tmp_path, *args)
    results = read_results(tmp_path / "run" / "results.jsonl")
    assert {r.op for r in results} >= {"gemm", "sparse_gemm", "conv"}
    for r in results:
        if r.op == "gemm" or (r.op == "sparse_gemm" and r.precision.name is Precision.FP32):
            assert r.status is Status.OK and r.check.passed, (r.id, r.reason)
        else:
            assert r.status is Status.UNSUPPORTED and r.reason, (r.id, r.status, r.reason)
    sparse = next(r for r in results if r.op == "sparse_gemm" and r.status is Status.OK)
    assert sparse.info["speedup_vs_dense"] > 0
    proc = run_cli("deepbench", "check", str(bundle), env={"COLUMNS": "300"})
    assert proc.returncode == 0 and "check passed" in proc.stdout, proc.stdout + proc.stderr
