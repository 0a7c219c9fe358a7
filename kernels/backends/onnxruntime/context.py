"""What every onnxruntime op module needs: seeded random inputs and session options."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from ...inputs import draw
from ...precision import Precision
from ...reference import int8_operands
from .session import OPSET, BoundCall, SessionOptions, single_op_model


class OrtContext:
    def __init__(self, options: SessionOptions, seed: int, inputs: str = "normal") -> None:
        self.options = options
        self.inputs = inputs  # Settings.inputs (kernels/inputs.py)
        self.seed = seed  # whole models (model.py) draw their weights from it, as the torch backend does
        self.rng = np.random.default_rng(seed)

    def random(self, shape: tuple[int, ...], precision: Precision, scale: float = 1.0) -> np.ndarray:
        """Random normal (fp32) or uniform full-range int8 values (--inputs: kernels/inputs.py)."""
        return draw(self.rng, shape, precision, self.inputs, scale, int8_operands.activations)

    def weights(self, shape: tuple[int, ...], precision: Precision, scale: float = 1.0) -> np.ndarray:
        """As `random`, with int8 weights in the symmetric range [-127, 127] (kernels/reference/int8_operands.py)."""
        return draw(self.rng, shape, precision, self.inputs, scale, int8_operands.weights)

    def bound(
        self,
        node: onnx.NodeProto | Sequence[onnx.NodeProto],
        inputs: dict[str, np.ndarray],
        outputs: dict[str, np.ndarray],
        initializers: dict[str, np.ndarray],
        opset: int = OPSET,
    ) -> BoundCall:
        model = single_op_model(node, inputs, outputs, initializers, opset)
        return BoundCall(model, self.options, inputs, outputs)
