"""What the onnxruntime backend declares, importable without its library: an inference engine (single-operator
ONNX models on the CPU execution provider), so every kernel times its forward pass alone, and its recurrent
layers count the input projection (the library cannot leave it out); the ARM platform's second choice."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..contract.declaration import BackendDeclaration, NoOptions


class OrtDeclaration(BackendDeclaration[NoOptions]):
    libraries = ("onnxruntime",)
    platforms: ClassVar[Mapping[str, int]] = {"arm": 2}
    forward_only = True
    install_hint = "pip install 'deepbench[onnxruntime]'"

    def counts_input_projection(self, device: str) -> bool:
        return True


ONNXRUNTIME = OrtDeclaration("onnxruntime", NoOptions)
