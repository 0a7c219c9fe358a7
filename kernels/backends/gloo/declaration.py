"""What the gloo backend declares, importable without torch: its library and the engine of its ranks."""

from __future__ import annotations

from ..collectives.declaration import MAX_EXACT_RANKS, TORCHRUN
from ..contract.declaration import BackendDeclaration, NoOptions


class GlooDeclaration(BackendDeclaration[NoOptions]):
    libraries = ("gloo",)
    launcher = TORCHRUN
    max_ranks = MAX_EXACT_RANKS


GLOO = GlooDeclaration("gloo", NoOptions)
