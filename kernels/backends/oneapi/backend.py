"""The oneapi backend's class: the router (shared/router.py) over Intel's libraries, each operation on the
backend its declaration names (declaration.py); they share nothing but the host's CPUs."""

from __future__ import annotations

from typing import Any, ClassVar

from ...noise import quiet_threads
from ...results import Settings
from ..contract.declaration import BackendDeclaration
from ..cpu.runtime import physical_cores
from ..shared.router import RouterBackend
from .declaration import ONEAPI


class OneapiBackend(RouterBackend):
    name = "oneapi"
    declaration: ClassVar[BackendDeclaration[Any]] = ONEAPI

    def __init__(self, settings: Settings) -> None:
        """One thread count for the whole run, fixed before any library loads: each routed backend's own
        default would probe the others' load again and could differ (PyTorch one per CPU, MKL and oneDNN one
        per physical core), while the run records, and the contention judgment counts, one figure."""
        if settings.threads is None:
            settings = settings.model_copy(update={"threads": quiet_threads(cores=physical_cores())})
        super().__init__(settings)
