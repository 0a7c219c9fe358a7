"""What the nccl and rccl backends declare, importable without torch or NCCL: the collective layer's
options (collectives/declaration.py, stored under `nccl`), the libraries, what their ranks must be
passed across nodes, and the original tool their results are set beside (nccl-tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..collectives.declaration import CollectiveDeclaration, CollectiveOptions

# NVLink multicast (NVLS) stays off unless the site sets it: a launch command passes the site's value on.
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0"}


class NcclDeclaration(CollectiveDeclaration):
    libraries: ClassVar[tuple[str, ...]] = ("NCCL", "nccl4py")
    rank_environment: ClassVar[Mapping[str, str]] = NVLS_OFF
    anchors = ("nccl-tests",)


class RcclDeclaration(NcclDeclaration):
    """RCCL reads NCCL's variables, and nccl-tests builds for ROCm as rccl-tests with the same output."""

    libraries = ("RCCL",)


TITLE = "nccl, rccl backends (collectives)"
NCCL = NcclDeclaration("nccl", CollectiveOptions, title=TITLE)
RCCL = RcclDeclaration("nccl", CollectiveOptions, title=TITLE)
