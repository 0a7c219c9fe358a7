"""What the nvidia backend declares (backends/contract/declaration.py), importable without any library: which
backend serves which operation, the one table of it (the checker reads it for the backends a
result of an nvidia run may name; backend.py for where each kernel goes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..contract.declaration import BackendDeclaration, NoOptions


class NvidiaDeclaration(BackendDeclaration[NoOptions]):
    # operation -> the backend (kernels/backends/__init__.py BACKENDS) that calls its native library;
    # every other operation, and a kernel that backend does not cover, runs on the fallback.
    serves: ClassVar[Mapping[str, str]] = {
        "gemm": "cublas",
        "conv": "cudnn",
        "sparse_gemm": "cusparse",
        "sparse24_gemm": "cusparselt",
    }
    fallback = "torch"
    platforms: ClassVar[Mapping[str, int]] = {"nvidia": 2}
    # Several ranks: NCCL (the nccl backend) on the run's GPUs.
    ranked_collectives: ClassVar[Mapping[str, str]] = {"cuda": "nccl"}


NVIDIA = NvidiaDeclaration("nvidia", NoOptions)
