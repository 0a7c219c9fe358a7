"""What every mkl operation module needs: the loaded library, the run's options and padding rule, seeded
operands, and MKL's runtime as each part records it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...padding import PadMode
from .binding import Mkl
from .cpu_isa import CpuIsa
from .declaration import MklOptions, MklRuntimeInfo
from .operands import Draw


@dataclass
class MklContext:
    mkl: Mkl
    options: MklOptions
    pad: PadMode
    rng: np.random.Generator
    draw: Draw
    cpu: CpuIsa
    runtime: MklRuntimeInfo

    @property
    def deepbench_ld(self) -> bool:
        """DeepBench's padded leading dimensions (FIX_LD), unless --pad none asks for the tight ones."""
        return self.pad is not PadMode.NONE
