"""What the tflite backend declares, importable without its library: an inference engine (single-operator .tflite
models in LiteRT's interpreter), so every kernel times its forward pass alone, and its recurrent layers count
the input projection (the library cannot leave it out); the ARM platform's default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..contract.declaration import BackendDeclaration, NoOptions


class TfliteDeclaration(BackendDeclaration[NoOptions]):
    libraries = ("LiteRT", "XNNPACK")
    platforms: ClassVar[Mapping[str, int]] = {"arm": 3}
    forward_only = True
    install_hint = "pip install 'deepbench[tflite]'"

    def counts_input_projection(self, device: str) -> bool:
        return True


TFLITE = TfliteDeclaration("tflite", NoOptions)
