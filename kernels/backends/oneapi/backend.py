"""The oneapi backend's class: the router (shared/router.py) over Intel's libraries, each operation on the
backend its declaration names (declaration.py); they share nothing but the host's CPUs."""

from __future__ import annotations

from typing import Any, ClassVar

from ..contract.declaration import BackendDeclaration
from ..shared.router import RouterBackend
from .declaration import ONEAPI


class OneapiBackend(RouterBackend):
    name = "oneapi"
    declaration: ClassVar[BackendDeclaration[Any]] = ONEAPI
