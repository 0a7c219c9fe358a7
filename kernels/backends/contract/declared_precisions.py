"""The precisions that name one library call's arithmetic (precision.DECLARED_ONLY: fp16acc16, DeepBench's
fp16-accumulate cublasGemmEx): only a backend that declares one may run a kernel in it. Apart from
base.py, which the registry imports, so that asking the registry here makes no import circle."""

from __future__ import annotations

from ...precision import DECLARED_ONLY, PRECISIONS, Precision
from .. import declaration_of, declared
from .base import Unsupported


def makers_of(precision: Precision) -> list[str]:
    """The backends that declare `precision` (with their library's own types for it)."""
    return [name for name, declared_ in declared().items() if precision in declared_.precisions]


def refuse_undeclared(precision: Precision, backend: str) -> None:
    """Raise Unsupported where `precision` names one library call's arithmetic (DECLARED_ONLY:
    fp16acc16, DeepBench's fp16-accumulate cublasGemmEx) and `backend`, the one that would make the
    kernel, does not declare it: anything it ran instead would be another arithmetic under that name.
    The harness asks before every `prepare`, so no backend needs to know these precisions."""
    if precision not in DECLARED_ONLY:
        return
    if precision in declaration_of(backend).precisions:
        return
    makers = ", ".join(makers_of(precision)) or "none"
    raise Unsupported(
        f"{precision.value} is one library call's arithmetic ({PRECISIONS[precision].description}), "
        f"which the {backend} backend does not make (backends that do: {makers})"
    )
