"""What the oneapi backend declares, importable without any library: which backend serves which
operation, the one table of it, and that it is the default of the CPU and Intel platforms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..contract.declaration import BackendDeclaration, NoOptions


class OneapiDeclaration(BackendDeclaration[NoOptions]):
    # operation -> the backend (kernels/backends/__init__.py BACKENDS) that calls its Intel library; every
    # other operation, and a kernel whose library is missing here, runs on the fallback.
    serves: ClassVar[Mapping[str, str]] = {
        "gemm": "mkl",
        "sparse_gemm": "mkl",
        "conv": "onednn",
        "rnn": "onednn",
        "batched_gemm": "onednn",  # oneDNN's matmul: MKL has no batched bf16, fp16 or int8 GEMM
    }
    fallback = "torch"
    # x86-64 CPUs, Intel's or not (MKL and oneDNN choose their code paths by the CPU, and record them).
    platforms: ClassVar[Mapping[str, int]] = {"cpu": 2, "intel": 2}
    # Several ranks: torch.distributed's gloo on the host's cores, as the torch backend's.
    ranked_collectives: ClassVar[Mapping[str, str]] = {"cpu": "gloo"}
    install_hint = "pip install 'deepbench[intel]'"


ONEAPI = OneapiDeclaration("oneapi", NoOptions)
