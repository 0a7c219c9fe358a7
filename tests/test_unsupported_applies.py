"""An `unsupported` result is accepted where its backend says the reason can apply to that kernel and
precision (issue 57 case 4: declaration.py `may_refuse`, by default from the code: reason_guards.py). No
false refusal: every Unsupported the CPU backends here really raise, for the smallest kernel of each
operation in every precision, is one the checker accepts for that kernel. And the code reader itself:
the kernel class a site's function takes, the conditions above it, early returns, module constants."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from deepbench.kernels.backends import BACKENDS, declaration_of, load_backend
from deepbench.kernels.backends.contract.base import Unsupported
from deepbench.kernels.backends.contract.declared_precisions import refuse_undeclared
from deepbench.kernels.backends.contract.reason_guards import reachable, sites
from deepbench.kernels.backends.contract.unsupported_reasons import BackendSites, backend_reasons, can_refuse
from deepbench.kernels.catalog import by_id, catalog
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Settings

CPU_BACKENDS = ("torch", "onnxruntime", "tflite")  # the backends whose libraries a CPU machine has
HEAVY = {"model"}  # a whole model's build is a test of its own (test_models.py); its reasons: models/instance.py


def smallest_of_each_operation() -> list[str]:
    best: dict[str, tuple[float, str]] = {}
    for k in catalog():
        if k.op in HEAVY:
            continue
        cost = sum(k.flops(d) for d in k.DIRECTIONS) + sum(k.min_bytes(d, Precision.FP32) for d in k.DIRECTIONS)
        if k.op not in best or cost < best[k.op][0]:
            best[k.op] = (cost, k.id)
    return sorted(kid for _, kid in best.values())


def raised(backend_name: str) -> Iterator[tuple[str, Precision, str]]:
    """(kernel id, precision, reason) of every Unsupported the backend raises here for those kernels."""
    backend = load_backend(backend_name, Settings(threads=1))
    try:
        for kid in smallest_of_each_operation():
            kernel = by_id()[kid]
            for precision in Precision:
                try:
                    refuse_undeclared(precision, backend.backend_for(kernel, precision))
                    backend.prepare(kernel, precision)
                except Unsupported as exc:
                    yield kid, precision, str(exc)
                finally:
                    backend.release()
    finally:
        backend.close()


@pytest.mark.parametrize("backend_name", CPU_BACKENDS)
def test_every_reason_a_backend_raises_is_accepted_for_its_kernel(backend_name: str) -> None:
    seen = list(raised(backend_name))
    assert seen, f"{backend_name} refused nothing: the test proves nothing"
    refused = [
        (kid, p.value, reason) for kid, p, reason in seen if not can_refuse(backend_name, by_id()[kid], p, reason)
    ]
    assert not refused, refused


@pytest.mark.parametrize("backend_name", sorted(BACKENDS))
def test_every_registered_backend_answers_from_its_code(backend_name: str) -> None:
    """Each registered backend's declaration answers, and its code's sites are read (none raise here)."""
    reasons = backend_reasons(backend_name)
    assert reasons, f"no raise Unsupported site found for {backend_name}"
    kernel = by_id()["gemm/train/000"]
    sites_ = BackendSites(backend_name)
    assert isinstance(declaration_of(backend_name).may_refuse(kernel, Precision.FP32, "x" * 40, "cpu", sites_), bool)


def _site(source: str) -> object:
    (site,) = list(sites(ast.parse(source)))
    return site


SPARSE = "sparse_gemm/inference_device/000"
TRANSPOSED = """
def f(kernel: SparseGemmKernel):
    if kernel.a_t or kernel.b_t:
        raise Unsupported("transposed, not run")
"""
TAKES_SPARSE = """
def f(kernel: SparseGemmKernel):
    raise Unsupported("a sparse GEMM's reason")
"""
PRECISIONS = """
P = (Precision.FP32, Precision.FP16)
def f(kernel, precision: Precision):
    if precision not in P:
        raise Unsupported("not in this precision")
"""
TABLE_AFTER_RETURN = """
OPS = {"gemm": 1}
def f(kernel: Kernel):
    if isinstance(kernel, CollectiveKernel):
        return 1
    if kernel.op not in OPS:
        raise Unsupported("not an operation it runs")
"""
UNKNOWABLE = """
def f(kernel: Kernel, ctx):
    if ctx.is_cuda and kernel.op == "gemm":
        raise Unsupported("only on a GPU, and only a GEMM")
"""


@pytest.mark.parametrize(
    "source, kid, precision, reachable_",
    [
        (TRANSPOSED, SPARSE, Precision.FP32, False),  # the condition above the site, on the kernel's fields
        (TAKES_SPARSE, "gemm/train/000", Precision.FP32, False),  # the class the function takes
        (TAKES_SPARSE, SPARSE, Precision.FP32, True),
        (PRECISIONS, "gemm/train/000", Precision.FP16, False),  # the precision against a module constant
        (PRECISIONS, "gemm/train/000", Precision.INT8, True),
        (TABLE_AFTER_RETURN, "all_reduce/train/000", Precision.FP32, False),  # an early return before the site
        (TABLE_AFTER_RETURN, "conv/train/000", Precision.FP32, True),  # an operation table's keys
        (TABLE_AFTER_RETURN, "gemm/train/000", Precision.FP32, False),
        (UNKNOWABLE, "gemm/train/000", Precision.FP32, True),  # what the reader cannot know never refuses
        (UNKNOWABLE, "conv/train/000", Precision.FP32, False),
    ],
)
def test_the_reader_of_a_sites_conditions(source: str, kid: str, precision: Precision, reachable_: bool) -> None:
    assert reachable(_site(source), by_id()[kid], precision) is reachable_  # type: ignore[arg-type]
