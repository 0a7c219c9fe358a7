"""2:4 structured sparsity (suite `sparse-2of4`, operation `sparse24_gemm`, backend `cusparselt`)
on a machine without a GPU: the suite, the padding, the costs, the reasons given where it cannot
run, the nvidia backend's choice, and its reports. The GPU tests are in test_gpu_native.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepbench.kernels import costs, padding
from deepbench.kernels.backends import BACKENDS, result_backends
from deepbench.kernels.backends.nvidia.declaration import NVIDIA
from deepbench.kernels.catalog import KERNEL_CLASSES, Sparse24GemmKernel, catalog, traits_of
from deepbench.kernels.precision import Precision
from deepbench.kernels.suites import SUITES, suite_kernels
from tests.conftest import run_cli

SUITE = "sparse-2of4"


def test_one_kernel_per_distinct_sparse_shape_in_first_occurrence_order() -> None:
    kernels = suite_kernels(SUITE)
    shapes: list[tuple[int, int, int]] = []
    for k in catalog():
        if (
            k.op == "sparse_gemm"
            and k.set in ("inference_server", "inference_device")
            and (k.m, k.n, k.k) not in shapes
        ):
            shapes.append((k.m, k.n, k.k))
    assert len(kernels) == 12 == len(shapes)
    assert [(k.m, k.n, k.k) for k in kernels] == shapes
    assert [k.id for k in kernels] == [f"sparse24_gemm/sparse_2of4/{i:03d}" for i in range(12)]
    assert all(not k.a_t and not k.b_t for k in kernels)
    assert kernels[0].application == "DeepSpeech"
    assert {(k.m, k.n) for k in kernels} >= {(7860, 2), (7680, 1)}


def test_not_part_of_deepbenchs_629() -> None:
    assert "sparse24_gemm" in KERNEL_CLASSES and SUITE in SUITES
    assert not any(k.op == "sparse24_gemm" for k in catalog())
    assert sum(len(suite_kernels(s)) for s in ("train", "inference-server", "inference-device")) == 629


def test_flops_are_the_products_made_and_bytes_the_compressed_operand() -> None:
    k = Sparse24GemmKernel(set="sparse_2of4", index=0, m=64, n=8, k=128, a_t=False, b_t=False)
    assert k.flops() == costs.sparse_gemm_flops(64, 8, 128, 0.5) == 2 * 64 * 128 * 8 / 2
    assert k.flops() == k.dense_flops() / 2
    kept = 64 * 128 / 2
    assert k.min_bytes("fwd", Precision.FP16) == kept * (2 + 2 / 8) + 128 * 8 * 2 + 64 * 8 * 2
    assert k.min_bytes("fwd", Precision.INT8) == kept * (1 + 2 / 8) + 128 * 8 * 1 + 64 * 8 * 4


@pytest.mark.parametrize(
    ("precision", "structured", "dense"),
    [(Precision.FP16, 16, 8), (Precision.BF16, 16, 8), (Precision.INT8, 32, 16), (Precision.FP8, 32, 16)],
)
def test_padding_to_cusparselt_descriptor_multiples(precision: Precision, structured: int, dense: int) -> None:
    from deepbench.kernels.precision import INPUT_BYTES

    shape = padding.structured_sparse_shape(7860, 1, 2560, INPUT_BYTES[precision])
    assert shape == {"m": padding.pad_to(7860, structured), "n": dense, "k": 2560}
    assert padding.changed({"m": 7860, "n": 1, "k": 2560}, shape) == {"m": shape["m"], "n": dense}
    assert padding.structured_sparse_shape(10752, 6000, 3584, INPUT_BYTES[precision]) == {
        "m": 10752,
        "n": padding.pad_to(6000, dense),
        "k": 3584,
    }


def test_traits_show_the_dense_time_and_speedup() -> None:
    traits = traits_of("sparse24_gemm")
    assert [c.header for c in traits.run_columns] == ["dense (us)", "speedup"]
    assert traits.run_columns == traits_of("sparse_gemm").run_columns
    info = {"dense_time_us": {"median": 12.5}, "speedup_vs_dense": 1.6}
    assert [c.value(info) for c in traits.run_columns] == [12.5, 1.6]


def test_backend_registered_and_chosen_by_nvidia() -> None:
    assert BACKENDS["cusparselt"].target.endswith("cusparselt.backend:CusparseLtBackend")
    assert "cusparselt" in result_backends("nvidia")
    assert NVIDIA.serves["sparse24_gemm"] == "cusparselt"


def test_precisions_without_a_2of4_product_are_unsupported_with_the_reason() -> None:
    from deepbench.kernels.backends.contract.base import Unsupported
    from deepbench.kernels.backends.cusparselt import structured

    assert set(structured.TYPES) == {Precision.FP16, Precision.BF16, Precision.INT8, Precision.FP8}
    for precision in (Precision.FP32, Precision.TF32):
        with pytest.raises(Unsupported, match="1:2"):
            structured.require(None, precision)


def test_cusparselt_backend_without_its_binding_says_what_to_install() -> None:
    from deepbench.kernels.backends import load_backend
    from deepbench.kernels.backends.gpu.cuda.packages import INSTALL_HINT
    from deepbench.kernels.results import Settings

    backend = load_backend("cusparselt", Settings(device="cpu"))
    if backend.lib is not None:
        pytest.skip("nvmath-python is installed here")
    kernel = suite_kernels(SUITE)[0]
    from deepbench.kernels.backends.contract.base import Unsupported

    with pytest.raises(Unsupported, match="nvmath-python") as err:
        backend.prepare(kernel, Precision.FP16)
    assert INSTALL_HINT in str(err.value)


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sparse24") / "run"
    proc = run_cli(
        "deepbench-run", "--local", "--suite", SUITE, "--fast", "--warm-up", "0", "--out", str(out), "--quiet"
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def test_cpu_run_ends_cleanly_with_every_kernel_unsupported(cpu_run: Path) -> None:
    records = [json.loads(line) for line in (cpu_run / "results.jsonl").read_text().splitlines()]
    assert len(records) == 12 and {r["status"] for r in records} == {"unsupported"}
    assert all("cuSPARSELt" in r["reason"] and "no CPU library" in r["reason"] for r in records)


# Each format and the library it needs (installed by CI; elsewhere the test skips without it).
FORMAT_NEEDS = {"table": None, "md": None, "csv": None, "html": "plotly", "xlsx": "openpyxl"}


def test_every_registered_format_is_tried() -> None:
    from deepbench.runner.render.render_formats import formats

    assert set(formats()) == set(FORMAT_NEEDS)


@pytest.mark.parametrize("fmt", sorted(FORMAT_NEEDS))
def test_cpu_run_reports_in_every_format(cpu_run: Path, tmp_path: Path, fmt: str) -> None:
    if FORMAT_NEEDS[fmt]:
        pytest.importorskip(FORMAT_NEEDS[fmt], reason=f"the {fmt} format needs {FORMAT_NEEDS[fmt]}")
    out = tmp_path / f"report.{fmt}"
    proc = run_cli("deepbench", "report", str(cpu_run), "--format", fmt, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.exists() or proc.stdout


def test_the_dense_twin_runs_the_layout_of_the_2of4_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuBLAS's int8 tensor-core GEMM takes TN alone: the dense side of a 2:4 product runs the
    product's layout (A k-contiguous), not the kernel's NN, which would time another GEMM."""
    from deepbench.kernels.backends.contract.base import Unsupported
    from deepbench.kernels.backends.cusparselt.structured import DENSE_LAYOUT
    from deepbench.kernels.backends.shared.dense_beside import DenseBeside
    from deepbench.kernels.catalog import GemmKernel
    from deepbench.kernels.results import Settings

    seen: list[GemmKernel] = []

    class Recorder:
        def prepare(self, kernel: GemmKernel, precision: Precision) -> None:
            seen.append(kernel)
            raise Unsupported("recorded")

    beside = DenseBeside("cusparselt", Settings(), cuda=None)
    monkeypatch.setattr(beside, "_dense", Recorder())
    kernel = suite_kernels(SUITE)[3]
    out = beside.measure(kernel, Precision.INT8, rule=None, layout=DENSE_LAYOUT)  # type: ignore[arg-type]
    assert out == {"dense_unsupported": "recorded"}
    assert (seen[0].a_t, seen[0].b_t) == DENSE_LAYOUT == (True, False)
    assert (seen[0].m, seen[0].n, seen[0].k) == (kernel.m, kernel.n, kernel.k)
