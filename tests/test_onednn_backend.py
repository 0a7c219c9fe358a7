"""The oneDNN backend (kernels/backends/onednn/) on the real library: every precision of its operations
runs and passes its float64 check or is `unsupported` naming the instruction set it lacks, a spoiled
output fails its check, the race keeps the fastest correct implementation, each part records what
oneDNN ran it with, and `deepbench-run --local --backend onednn` runs suites end to end, its bundle
passing `deepbench check`. Skipped, with one line, where the onednn wheel is not installed."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.backends import declaration_of, load_backend
from deepbench.kernels.backends.contract.base import Unsupported
from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.backends.contract.unsupported_reasons import could_give
from deepbench.kernels.backends.onednn import binding, race
from deepbench.kernels.backends.onednn import constants as C
from deepbench.kernels.backends.onednn.declaration import (
    ONEDNN,
    OnednnOptions,
    OnednnPartInfo,
    implementation_pin,
    recorded_pins,
)
from deepbench.kernels.catalog import ConvKernel, RnnKernel, by_id
from deepbench.kernels.layers import BatchedGemmKernel
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Check, Settings, Status
from deepbench.kernels.results_file import read_results

from .conftest import local_bundle, local_run, run_cli

# Found without loading it (collection must not load oneDNN's runtimes into every test's process); an
# installed oneDNN that cannot load fails the tests below instead of skipping them.
MISSING = binding.not_installed(ONEDNN.install_hint)
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING)

BACKEND_DIR = Path(binding.__file__).parent
HEADER = binding.library_folder().parent / "include" / "oneapi" / "dnnl" / "dnnl.h"
ISA_NAMED = r"needs .*(avx512_core|avx2_vnni).*; this CPU's ISA in oneDNN is "
CONV = ConvKernel(set="train", index=0, w=12, h=10, c=8, n=2, k=16, s=3, r=3, pad_w=1, pad_h=0, stride_w=1, stride_h=2)
PRECISIONS = (Precision.FP32, Precision.BF16, Precision.FP16, Precision.INT8)
CELLS = ("vanilla", "lstm", "gru")


def _backend(**settings: object):
    return load_backend("onednn", Settings(threads=1, **settings))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def backend():
    return _backend()


def _prepared_or_unsupported(backend, kernel, precision: Precision):
    """The kernel prepared, or None where it is unsupported for a reason the test accepts (the CPU lacks the
    precision's instructions, or oneDNN has only its reference loops for one of its directions)."""
    try:
        return backend.prepare(kernel, precision)
    except Unsupported as exc:
        assert "needs" in str(exc) or "reference implementation" in str(exc) or "no " in str(exc), exc
        if "needs" in str(exc):
            assert any(name in str(exc) for name in ("avx512_core", "avx2_vnni")), exc
        return None


def _run_and_check(part) -> Check:
    part.run()
    return part.check()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_convolution_every_direction_passes_or_is_unsupported(backend, precision: Precision) -> None:
    prepared = _prepared_or_unsupported(backend, CONV, precision)
    if prepared is None:
        return
    expected = ["fwd"] if precision is Precision.INT8 else ["fwd", "bwd_data", "bwd_filter"]
    assert [p.direction for p in prepared.parts] == expected
    for part in prepared.parts:
        check = _run_and_check(part)
        assert check.passed, (part.direction, check)
        if precision is Precision.INT8:
            assert check.error == 0.0 and check.method == "sampled-exact-int"
        assert part.flops == CONV.flops(part.direction)
    assert prepared.padding == {}
    assert all("std_conv_bench.cpp" in part.info["onednn"]["padding"] for part in prepared.parts)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "geometry",
    [
        dict(pad_w=0, pad_h=0, stride_w=1, stride_h=1, s=1, r=1),
        dict(pad_w=2, pad_h=1, stride_w=2, stride_h=3, s=5, r=3),
    ],
)
def test_convolution_tolerances_hold_over_seeds(seed: int, geometry: dict) -> None:
    kernel = CONV.model_copy(update=geometry)
    prepared = _backend(seed=seed).prepare(kernel, Precision.FP32)
    for part in prepared.parts:
        check = _run_and_check(part)
        assert check.passed and check.error is not None and check.error < check.tolerance / 10, (part.direction, check)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_filter"])
def test_a_spoiled_convolution_output_fails(backend, direction: str) -> None:
    part = next(p for p in backend.prepare(CONV, Precision.FP32).parts if p.direction == direction)
    part.run()
    placed = part.output.placed
    values = placed.read().copy()
    placed.fill(values * np.float32(1.01))  # every element 1% off, in the primitive's layout
    assert not part.check().passed


def test_an_unwritten_int8_output_fails(backend) -> None:
    prepared = _prepared_or_unsupported(backend, CONV, Precision.INT8)
    if prepared is None:
        pytest.skip("this CPU has no int8 convolution in oneDNN")
    part = prepared.parts[0]
    part.run()
    part.output.fill(1)  # the harness's poison for integers: as if the call wrote nothing
    assert not part.check().passed


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_recurrent_layers_pass_or_are_unsupported(backend, cell: str, precision: Precision) -> None:
    kernel = RnnKernel(set="train", index=0, hidden=24, batch=3, timesteps=5, cell=cell)
    try:
        prepared = backend.prepare(kernel, precision)
    except Unsupported as exc:
        assert precision in (Precision.FP16, Precision.INT8) or "needs" in str(exc), exc
        return
    assert precision in (Precision.FP32, Precision.BF16)
    assert [p.direction for p in prepared.parts] == ["fwd", "bwd"]
    for part in prepared.parts:
        part.run()  # twice: the backward's weight gradients accumulate, and its check must not see that
        check = _run_and_check(part)
        assert check.passed, (cell, part.direction, check)
        assert part.flops == kernel.flops(part.direction, input_projection=True)
    assert prepared.info["input_projection_timed"] and prepared.info["input_gradient_timed"]
    assert ONEDNN.counts_input_projection("cpu")


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cell", CELLS)
def test_recurrent_tolerances_hold_over_seeds(seed: int, cell: str) -> None:
    kernel = RnnKernel(set="train", index=0, hidden=40, batch=4, timesteps=9, cell=cell)
    for part in _backend(seed=seed).prepare(kernel, Precision.FP32).parts:
        check = _run_and_check(part)
        assert check.passed and check.error is not None and check.error < check.tolerance / 10, (part.direction, check)


@pytest.mark.parametrize("cell", CELLS)
def test_a_spoiled_recurrent_output_fails(backend, cell: str) -> None:
    kernel = RnnKernel(set="train", index=0, hidden=16, batch=2, timesteps=4, cell=cell)
    fwd, bwd = backend.prepare(kernel, Precision.FP32).parts
    fwd.run()
    out = fwd.output.placed
    out.fill(out.read() * np.float32(1.01))
    assert not fwd.check().passed
    # the backward's check runs the call itself: spoil what it reads (its recurrent weights), not what it writes
    fwd.run()  # the forward's states, which the backward reads, restored
    bwd.run()
    assert bwd.check().passed
    recurrent = next(t for name, t in _runner_tensors(bwd).items() if name == "bwd_weights_iter")
    recurrent.fill(recurrent.read() * np.float32(1.05))
    assert not bwd.check().passed


def _runner_tensors(part) -> dict:
    """The tensors of a recurrent part's runner (its check's closure holds the runner)."""
    closure = {c.cell_contents for c in part.check.__closure__ or () if hasattr(c.cell_contents, "tensors")}
    (runner,) = closure
    return runner.tensors


@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_batched_gemm_passes_or_is_unsupported(backend, precision: Precision, a_t: bool, b_t: bool) -> None:
    kernel = BatchedGemmKernel(set="layers", index=0, batch=3, m=19, n=7, k=33, a_t=a_t, b_t=b_t)
    prepared = _prepared_or_unsupported(backend, kernel, precision)
    if prepared is None:
        return
    (part,) = prepared.parts
    check = _run_and_check(part)
    assert check.passed, check
    if precision is Precision.INT8:
        assert check.error == 0.0
    transposed = {"src": b_t, "weights": a_t}
    for role, formats in part.info["onednn"]["formats"].items():
        assert formats == ("acb" if transposed.get(role) else "abc"), (role, formats)
    part.output.fill(math.nan if precision is not Precision.INT8 else 1)
    assert not part.check().passed


def _candidate_rows(times: dict[str, float], wrong: frozenset[str] = frozenset()):
    candidates = [race.Candidate("convolution_direct", name, i) for i, name in enumerate(times)]

    def timed(c: race.Candidate, _out: float) -> float:
        return times[c.impl]

    def check(c: race.Candidate) -> Check:
        bad = c.impl in wrong
        return Check(passed=not bad, method="planted", error=1.0 if bad else 0.0, tolerance=0.5)

    return candidates, timed, check


def test_the_race_keeps_a_planted_fastest_candidate() -> None:
    candidates, timed, check = _candidate_rows({"jit:avx2": 300.0, "brgconv:avx512_core": 90.0, "x64:gemm:jit": 250.0})
    choice = race.choose(candidates, timed, check)
    assert choice.chosen.impl == "brgconv:avx512_core" and choice.fastest_correct_us == 90.0
    statuses = {row["candidate"]: row["status"] for row in choice.record()["candidates"]}
    assert statuses["convolution_direct:brgconv:avx512_core"] == "chosen"


def test_the_race_never_keeps_a_wrong_candidate_and_prefers_the_earlier_of_two_ties() -> None:
    times = {"jit:avx512_core": 100.0, "brgconv:avx512_core": 99.0, "jit:avx2": 50.0}
    candidates, timed, check = _candidate_rows(times, wrong=frozenset({"jit:avx2"}))
    choice = race.choose(candidates, timed, check)
    assert choice.chosen.impl == "jit:avx512_core"  # within MARGIN of the fastest correct, and offered first
    rows = {row["candidate"]: row for row in choice.table}
    assert rows["convolution_direct:jit:avx2"]["status"] == "rejected"
    _, timed_all_wrong, check_all_wrong = _candidate_rows(times, wrong=frozenset(times))
    with pytest.raises(race.NoCorrectCandidate):
        race.choose(candidates, timed_all_wrong, check_all_wrong)


def test_a_spent_race_budget_leaves_the_rest_listed_not_raced() -> None:
    candidates, timed, check = _candidate_rows({"jit:avx512_core": 100.0, "jit:avx2": 50.0, "x64:gemm:jit": 20.0})
    choice = race.choose(candidates, timed, check, budget_s=0.0)
    assert choice.chosen.impl == "jit:avx512_core"  # the one timed before the budget was found spent
    assert [row["status"] for row in choice.table] == ["chosen", "not raced", "not raced"]


def test_the_race_sets_aside_duplicates_and_reference_loops() -> None:
    names = ["convolution_direct:jit:avx512_core", "convolution_direct:ref:any", "convolution_auto:jit:avx512_core"]
    candidates = [race.Candidate(*n.split(":", 1), i) for i, n in enumerate(names)]
    timed, rows = race.screened(candidates)
    assert [c.pin for c in timed] == names[:1]
    assert [r["status"] for r in rows] == ["skipped", "duplicate"]


def test_the_recorded_info_is_typed_and_replayed(backend) -> None:
    prepared = backend.prepare(CONV, Precision.FP32)
    for part in prepared.parts:
        info = info_of(OnednnPartInfo, part.info)
        assert info is not None and info.library == "oneDNN"
        o = info.onednn
        assert o.pin == f"{o.algorithm}:{o.implementation}" and o.algorithm == "convolution_direct"
        assert o.isa.startswith("cpu_isa") and o.runtime and o.threading and o.threads == 1
        assert set(o.formats) == {"x", "w", "y"} if part.direction == "fwd" else len(o.formats) == 3
        assert any(row["status"] == "chosen" for row in o.candidates)
    assert declaration_of("onednn") is ONEDNN
    assert implementation_pin("conv/train/000/fp32/fwd=convolution_direct:jit:avx2") == (
        "conv/train/000/fp32/fwd",
        "convolution_direct:jit:avx2",
    )
    options = OnednnOptions(algorithm="direct", implementations={"*": "convolution_direct:jit:avx2"})
    assert ONEDNN.to_args(options) == ["--onednn-algorithm", "direct", "--onednn-impl", "convolution_direct:jit:avx2"]


def test_a_pinned_implementation_runs_and_an_absent_one_is_unsupported() -> None:
    offered = _backend().prepare(CONV, Precision.FP32).parts[0].info["onednn"]["candidates"]
    slow = next(row["candidate"] for row in offered if row["status"] == "unchecked")  # not the race's choice
    pins = {"implementations": {f"{CONV.id}/fp32/fwd": slow}}
    pinned = _backend(backend_options={"onednn": pins}).prepare(CONV, Precision.FP32)
    record = pinned.parts[0].info["onednn"]
    assert record["pin"] == slow and record["chosen_by"] == f"pinned (--onednn-impl {slow})"
    assert _run_and_check(pinned.parts[0]).passed
    assert all(p.info["onednn"]["chosen_by"].startswith("fastest") for p in pinned.parts[1:])
    absent = _backend(backend_options={"onednn": {"implementations": {"*": "convolution_direct:jit:nowhere"}}})
    with pytest.raises(Unsupported, match="is not offered"):
        absent.prepare(CONV, Precision.FP32)


def test_deepbench_s_algorithm_takes_the_first_implementation() -> None:
    prepared = _backend(backend_options={"onednn": {"algorithm": "direct"}}).prepare(CONV, Precision.FP32)
    for part in prepared.parts:
        record = part.info["onednn"]
        assert record["algorithm"] == "convolution_direct" and "first implementation" in record["chosen_by"]
        assert record["implementation"] == record["candidates"][0]["candidate"].split(":", 1)[1]


def test_the_threads_and_the_library_are_recorded() -> None:
    backend = _backend()
    facts = backend.device_facts()["onednn"]
    assert facts["threads"] == 1 and backend.device_facts()["threads"] == 1
    if facts["threading"] == "TBB":
        assert facts["threads_set_by"].startswith("tbb::global_control(max_allowed_parallelism, 1)")
        if len(os.sched_getaffinity(0)) >= 2:  # a later backend's count replaces the earlier one's
            assert load_backend("onednn", Settings(threads=2)).device_facts()["onednn"]["threads"] == 2
            assert _backend().device_facts()["onednn"]["threads"] == 1
    assert backend.library_versions()["oneDNN"].startswith("3.")


def test_a_missing_library_leaves_every_kernel_unsupported(tmp_path: Path) -> None:
    """In a process whose environment has no oneDNN (its lib folder empty, the loader's path without it)."""
    code = (
        "import sys; from pathlib import Path; from deepbench.kernels.backends.onednn import binding; "
        f"binding.library_folder = lambda: Path({str(tmp_path)!r}); binding.LIBRARY = 'libdnnl-absent.so.3'; "
        "from deepbench.kernels.backends import load_backend; from deepbench.kernels.results import Settings; "
        "from deepbench.kernels.catalog import by_id; from deepbench.kernels.precision import Precision; "
        "b = load_backend('onednn', Settings(threads=1)); "
        "from deepbench.kernels.backends.contract.base import Unsupported\n"
        "try:\n    b.prepare(by_id()['conv/inference_server/006'], Precision.FP32)\n"
        "except Unsupported as e:\n    print(e)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert "\n" not in line and "not installed" in line and "pip install 'deepbench[intel]'" in line, line


def test_an_older_cpu_s_missing_instructions_are_named() -> None:
    """oneDNN limited to AVX2 (ONEDNN_MAX_CPU_ISA, the library's own switch): bf16, fp16 and int8 are unsupported
    with the instructions they need, fp32 still runs."""
    code = (
        "from deepbench.kernels.backends import load_backend; from deepbench.kernels.results import Settings; "
        "from deepbench.kernels.precision import Precision; from deepbench.kernels.catalog import ConvKernel; "
        "from deepbench.kernels.backends.contract.base import Unsupported\n"
        f"k = ConvKernel.model_validate({CONV.model_dump()!r}); b = load_backend('onednn', Settings(threads=1))\n"
        "for p in (Precision.FP32, Precision.BF16, Precision.FP16, Precision.INT8):\n"
        "    try:\n        parts = b.prepare(k, p).parts\n"
        "        print(p.value, all((part.run(), part.check().passed)[1] for part in parts))\n"
        "    except Unsupported as e:\n        print(p.value, 'unsupported', e)"
    )
    env = {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**_env(), **env}
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    assert lines["fp32"] == "True", proc.stdout
    for p in ("bf16", "fp16", "int8"):
        assert lines[p].startswith("unsupported") and "this CPU's ISA in oneDNN is cpu_isa_avx2" in lines[p], lines[p]
    assert "avx512_core_bf16" in lines["bf16"] and "avx2_vnni" in lines["int8"]


def _env() -> dict[str, str]:
    return dict(os.environ)


def test_every_unsupported_reason_is_derivable_from_the_source(backend) -> None:
    """`deepbench check` accepts an unsupported result only with a reason the backend's source can give."""
    given = []
    for kernel, precision in [
        (RnnKernel(set="train", index=0, hidden=8, batch=1, timesteps=2, cell="lstm"), Precision.INT8),
        (CONV, Precision.TF32),
        (BatchedGemmKernel(set="layers", index=0, batch=1, m=2, n=2, k=2, a_t=False, b_t=False), Precision.FP8),
        (by_id()["gemm/train/020"], Precision.FP32),
    ]:
        with pytest.raises(Unsupported) as exc:
            backend.prepare(kernel, precision)
        given.append((str(exc.value), kernel.op, precision.value))
    for text, op, precision in given:
        assert could_give("onednn", text, op, precision), text


@pytest.mark.skipif(shutil.which("gcc") is None or not HEADER.exists(), reason="no C compiler or no oneDNN header")
def test_the_constants_are_the_header_s(tmp_path: Path) -> None:
    """Every value constants.py passes, against the compiler's reading of dnnl.h."""
    names = [n for n in vars(C) if n.isupper()]
    c_names = {n: _c_name(n) for n in names}
    source = '#include <stdio.h>\n#include "oneapi/dnnl/dnnl.h"\nint main(void) {\n'
    source += "".join(f'printf("{n} %lld\\n", (long long)({c}));\n' for n, c in c_names.items()) + "return 0; }\n"
    (tmp_path / "c.c").write_text(source)
    build = subprocess.run(
        ["gcc", f"-I{HEADER.parents[2]}", str(tmp_path / "c.c"), "-o", str(tmp_path / "c")],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    printed = dict(
        line.split()
        for line in subprocess.run([str(tmp_path / "c")], capture_output=True, text=True).stdout.splitlines()
    )
    assert {n: int(v) for n, v in printed.items()} == {n: getattr(C, n) for n in names}


C_NAMES = {  # constants.py name -> the C expression, where it is not dnnl_<lowercase name>
    "ENGINE_CPU": "dnnl_cpu",
    "TAG_ANY": "dnnl_format_tag_any",
    "FORMAT_KIND_ANY": "dnnl_format_kind_any",
    "FORMAT_KIND_BLOCKED": "dnnl_blocked",
    "FORMAT_KIND_OPAQUE": "dnnl_format_kind_opaque",
    "MEMORY_ALLOCATE": "(long long)(size_t)DNNL_MEMORY_ALLOCATE",
}


def _c_name(name: str) -> str:
    if name in C_NAMES:
        return C_NAMES[name]
    if name.startswith(("ARG_", "RUNTIME_", "MAX_NDIMS")):
        return f"DNNL_{name}"
    if name.startswith("TAG_"):
        return f"dnnl_{name[4:].lower()}"
    if name.startswith("ISA_"):
        return f"dnnl_cpu_isa_{name[4:].lower()}"
    if name.startswith("QUERY_"):
        return f"dnnl_query_{name[6:].lower()}"
    return f"dnnl_{name.lower()}"


@pytest.mark.slow
def test_the_smoke_suite_runs_and_its_bundle_passes_the_check(tmp_path: Path) -> None:
    bundle = local_bundle(tmp_path, "--backend", "onednn", "--suite", "smoke", "--fast", "--threads", "1")
    results = read_results(tmp_path / "run" / "results.jsonl")
    assert results
    for r in results:
        assert r.status in (Status.OK, Status.UNSUPPORTED), (r.id, r.status, r.reason)
        if r.op in ("conv", "rnn"):
            assert r.status is Status.OK and r.backend == "onednn", (r.id, r.reason)
        else:
            assert r.reason.startswith("the onednn backend does not run"), r.reason
    proc = run_cli("deepbench", "check", str(bundle))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["software"]["oneDNN"].startswith("3.") and record["device"]["onednn"]["threads"] == 1
    # verify's replay: the implementations the run recorded, pinned, run again
    replayed = ONEDNN.replay(OnednnOptions(), results)
    assert replayed.implementations and replayed.implementations == recorded_pins(results)
    conv = next(r for r in results if r.op == "conv" and r.status is Status.OK)
    again = _backend(backend_options={"onednn": ONEDNN.stored(replayed)}).prepare(conv.kernel, conv.precision.name)
    assert [p.info["onednn"]["pin"] for p in again.parts] == [p.info["onednn"]["pin"] for p in conv.parts]
    assert all(p.info["onednn"]["chosen_by"].startswith("pinned") for p in again.parts)


@pytest.mark.slow
@pytest.mark.parametrize(
    "suite,where",
    [
        ("inference-device", ["--ops", "conv,rnn", "--limit", "2"]),
        ("train", ["--ops", "conv,rnn", "--where", "n<=8", "--limit", "1"]),
        ("inference-server", ["--ops", "conv", "--limit", "2", "--precision", "int8"]),
    ],
)
def test_deepbench_s_sets_run(tmp_path: Path, suite: str, where: list[str]) -> None:
    out = local_run(tmp_path / "run", "--backend", "onednn", "--suite", suite, *where, "--fast", "--threads", "1")
    results = read_results(out / "results.jsonl")
    assert results
    for r in results:
        assert r.status in (Status.OK, Status.UNSUPPORTED), (r.id, r.status, r.reason)
        if r.status is Status.UNSUPPORTED:
            assert "needs" in r.reason or "reference implementation" in r.reason, r.reason
        elif r.op == "conv":
            expected = (
                {"fwd"}
                if r.kernel.set != "train" or r.precision.name is Precision.INT8
                else {"fwd", "bwd_data", "bwd_filter"}
            )
            assert {p.direction for p in r.parts} == expected
    pins = recorded_pins(results)
    assert all(":" in pin for pin in pins.values())
