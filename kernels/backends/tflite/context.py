"""What every TFLite op module needs: seeded inputs, LiteRT's interpreter for a generated model,
and the int8 quantization that keeps requantized outputs checkable."""

from __future__ import annotations

import math

import numpy as np

from ...inputs import draw
from ...precision import Precision
from ...reference import int8_operands
from .flatbuffer import ModelSpec, build

INT8_MIN, INT8_MAX = -128, 127
# E[q^2] of a uniform int8 value: 128^2 / 3. The output scale puts 3 sigma of the int32
# accumulator at the int8 limit, so most outputs are not saturated and the check sees them.
INT8_MEAN_SQUARE = 128.0**2 / 3
OUTPUT_SIGMAS = 3.0
XNNPACK_NODE = "DELEGATE"


def output_scale(reduction: int) -> float:
    """A power of two, so TFLite's fixed-point requantization multiplier is exact (2^30 with
    a shift): the int8 output is round(acc * scale) and the check can demand it exactly."""
    sigma = math.sqrt(reduction) * INT8_MEAN_SQUARE  # E[(x w)^2] = E[x^2] E[w^2]
    return 2.0 ** math.ceil(math.log2(OUTPUT_SIGMAS * sigma / INT8_MAX))


class TfliteContext:
    def __init__(self, threads: int, seed: int, use_xnnpack: bool = True, inputs: str = "normal") -> None:
        self.threads = threads
        self.inputs = inputs  # Settings.inputs (kernels/inputs.py)
        self.use_xnnpack = use_xnnpack
        self.rng = np.random.default_rng(seed)

    def random(self, shape: tuple[int, ...], precision: Precision, scale: float = 1.0) -> np.ndarray:
        """Random normal (fp32) or uniform full-range int8 values (--inputs: kernels/inputs.py)."""
        return draw(self.rng, shape, precision, self.inputs, scale, int8_operands.activations)

    def weights(self, shape: tuple[int, ...], precision: Precision, scale: float = 1.0) -> np.ndarray:
        """As `random`, with int8 weights in the symmetric range [-127, 127] (kernels/reference/int8_operands.py)."""
        return draw(self.rng, shape, precision, self.inputs, scale, int8_operands.weights)

    def interpreter(self, spec: ModelSpec, xnnpack: bool | None = None) -> LoadedModel:
        """`xnnpack=False` forces the builtin kernels for this model whatever the backend's setting."""
        return LoadedModel(build(spec), self.threads, self.use_xnnpack if xnnpack is None else xnnpack)


class LoadedModel:
    """An interpreter with its input set once: `invoke` is the timed call (inputs stay in place
    between invocations; outputs are read after timing)."""

    def __init__(self, model: bytes, threads: int, use_xnnpack: bool) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = OpResolverType.AUTO if use_xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.model = model
        self.interp = Interpreter(model_content=model, num_threads=threads, experimental_op_resolver_type=resolver)
        self.interp.allocate_tensors()
        self.invoke = self.interp.invoke

    def set_inputs(self, *arrays: np.ndarray) -> None:
        for detail, arr in zip(self.interp.get_input_details(), arrays, strict=False):
            self.interp.set_tensor(detail["index"], arr)

    def output(self) -> np.ndarray:
        return self.interp.get_tensor(self.interp.get_output_details()[0]["index"])

    def delegated(self) -> bool:
        """True when XNNPACK took the operator (the execution plan then holds a DELEGATE node)."""
        return any(op["op_name"] == XNNPACK_NODE for op in self.interp._get_ops_details())

    def info(self, operator: str) -> dict:
        return {
            "operator": operator,
            "weights": "constant in the model",
            "executed_by": "XNNPACK delegate" if self.delegated() else "TFLite builtin kernel (ruy/optimized)",
            "model_bytes": len(self.model),
        }
