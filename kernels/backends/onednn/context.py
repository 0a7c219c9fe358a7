"""What every oneDNN operation module needs: the library, its engine, the run's seeded inputs and
options, and the rule for which precisions this CPU offers.

oneDNN runs every precision somewhere: where the CPU lacks the instructions of a data type, it
falls back to reference loops or emulation (bf16 through float32 on AVX2, int8 through pairwise
int16 sums without VNNI, which can saturate). Those are not the CPU's offer of the precision, so a
precision is run only where oneDNN reports an ISA in effect that holds its dot-product
instructions (REQUIRED_ISA), and is `unsupported` naming them elsewhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...inputs import draw, drawn_for
from ...precision import Precision
from ...reference import int8_operands
from . import constants as C
from .binding import text
from .declaration import OnednnOptions
from .objects import Engine

U8_RANGE = (0, 256)  # unsigned activations over their full range (numpy's high is exclusive)


@dataclass(frozen=True)
class IsaNeed:
    """The oneDNN ISAs (dnnl_cpu_isa_t) any one of which offers a precision, and what they add."""

    isas: tuple[int, ...]
    what: str


REQUIRED_ISA = {
    Precision.BF16: IsaNeed(
        (C.ISA_AVX512_CORE_BF16, C.ISA_AVX2_VNNI_2), "bf16 dot products (AVX512_BF16, AVX-NE-CONVERT)"
    ),
    Precision.FP16: IsaNeed(
        (C.ISA_AVX512_CORE_FP16, C.ISA_AVX2_VNNI_2), "fp16 arithmetic (AVX512_FP16, AVX-NE-CONVERT)"
    ),
    Precision.INT8: IsaNeed((C.ISA_AVX512_CORE_VNNI, C.ISA_AVX2_VNNI), "int8 dot products with int32 sums (VNNI)"),
}


class OnednnContext:
    def __init__(self, lib: Any, options: OnednnOptions, seed: int, inputs: str = "normal") -> None:
        self.lib = lib
        self.engine = Engine(lib)
        self.options = options
        self.inputs = inputs  # Settings.inputs (kernels/inputs.py)
        self.rng = np.random.default_rng(seed)
        self.isa = int(lib.dnnl_get_effective_cpu_isa())
        self.isa_name = text(lib.dnnl_cpu_isa2str(self.isa))
        self.facts: dict[str, Any] = {}  # what every part records of the library: ISA, runtime, threads (backend.py)
        self.keep: list[Any] = []  # objects the library holds pointers to for the context's life

    def isa_offers(self, precision: Precision) -> bool:
        need = REQUIRED_ISA.get(precision)
        return need is None or any(self.isa & isa == isa for isa in need.isas)

    def missing_isa(self, precision: Precision) -> str:
        """The ISAs a precision needs, by oneDNN's names ('' where the CPU offers it)."""
        if self.isa_offers(precision):
            return ""
        need = REQUIRED_ISA[precision]
        return f"{' or '.join(text(self.lib.dnnl_cpu_isa2str(isa)) for isa in need.isas)} ({need.what})"

    def floats(self, shape: tuple[int, ...], precision: Precision, scale: float = 1.0) -> np.ndarray:
        """float32 values (rounded to their type where it is 16-bit, by the tensor's fill), as --inputs says."""
        return draw(
            self.rng, shape, Precision.FP32 if precision is Precision.INT8 else precision, self.inputs, scale, None
        )

    def signed_weights(self, shape: tuple[int, ...]) -> np.ndarray:
        """int8 weights in the symmetric range (kernels/reference/int8_operands.py), zeros where --inputs says."""
        return draw(self.rng, shape, Precision.INT8, self.inputs, 1.0, int8_operands.weights)

    def unsigned_activations(self, shape: tuple[int, ...]) -> np.ndarray:
        """uint8 activations over [0, 255]: oneDNN's int8 convolutions take unsigned sources (DeepBench's u8s8)."""
        if drawn_for(self.inputs, Precision.INT8) == "zeros":
            return np.zeros(shape, dtype=np.uint8)
        return self.rng.integers(*U8_RANGE, size=shape, dtype=np.uint8)
