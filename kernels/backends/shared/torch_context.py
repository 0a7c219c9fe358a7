"""What every operation on torch tensors needs from its device: dtypes, random inputs, precision modes.

Shared by the PyTorch backend and the native NVIDIA backends (native.py), which hold their operands
in torch memory: a module of its own, so that no backend imports another for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from ...inputs import drawn
from ...padding import PadMode
from ...precision import Precision
from ..contract.base import Unsupported
from ..gpu.cuda.device import set_torch_precision_mode

DTYPES = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
    Precision.INT8: torch.int8,
}
INT8_CUDA_MULTIPLE = 8  # torch._int_mm on CUDA: k and the output columns multiples of 8
INT8_CUDA_MIN_ROWS = 20  # torch._int_mm on CUDA: more than 16 rows (20 keeps DeepBench's multiple of 4)
INT8_RANGE = 64  # int8 inputs drawn from [-64, 64): random, never constant, no overflow in int32


@dataclass
class TorchContext:
    device: torch.device
    seed: int = 0
    pad: PadMode = PadMode.DEEPBENCH  # the problem handed to the library (kernels/padding.py)
    inputs: str = "normal"  # what operands are drawn from (Settings.inputs; kernels/inputs.py)
    generator: torch.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @contextmanager
    def padding(self, mode: PadMode) -> Iterator[None]:
        """Prepare under another padding rule for the while (--pad both prepares the raw shape too)."""
        saved, self.pad = self.pad, mode
        try:
            yield
        finally:
            self.pad = saved

    def dtype(self, precision: Precision) -> torch.dtype:
        if precision not in DTYPES:
            raise Unsupported(f"{precision.value} is not available through PyTorch on {self.device.type}")
        return DTYPES[precision]

    def random(
        self, shape: tuple[int, ...], dtype: torch.dtype, scale: float = 1.0, narrow: bool | None = None
    ) -> torch.Tensor:
        """Random normal inputs (int8: uniform integers): zeros or constants would run faster. Under
        --inputs, uniform [0, 1) or zeros instead (kernels/inputs.py; narrow: stored in under 32 bits,
        by default the dtype's width; fp8 operands drawn in float32 and rounded say so)."""
        kind = drawn(self.inputs, narrow=dtype.itemsize < torch.float32.itemsize if narrow is None else narrow)
        if kind == "zeros":
            return torch.zeros(shape, device=self.device, dtype=dtype)
        if dtype == torch.int8:
            return torch.randint(
                -INT8_RANGE, INT8_RANGE, shape, device=self.device, dtype=torch.int8, generator=self.generator
            )
        draw = torch.rand if kind == "uniform" else torch.randn
        t = draw(shape, device=self.device, dtype=torch.float32, generator=self.generator)
        if scale != 1.0:
            t.mul_(scale)
        return t.to(dtype)

    def set_precision_mode(self, precision: Precision) -> None:
        set_torch_precision_mode(precision)
        if precision is Precision.TF32 and not self.is_cuda:
            raise Unsupported("tf32 is a tensor-core mode of NVIDIA GPUs; this CPU computes float32 as fp32")

    def int8_gemm_shape(self, m: int, n: int, k: int) -> tuple[int, int, int, dict[str, int]]:
        """Device limits of torch._int_mm beyond DeepBench's padding to 4 (none on CPU).

        On CUDA, torch._int_mm(X (n x k), Y (k x m)) requires more than 16 rows in X and k and m
        multiples of 8 (cuBLASLt's int8 alignment); the padded sizes are returned and recorded."""
        if not self.is_cuda:
            return m, n, k, {}
        padded = {
            "m": -(-m // INT8_CUDA_MULTIPLE) * INT8_CUDA_MULTIPLE,
            "k": -(-k // INT8_CUDA_MULTIPLE) * INT8_CUDA_MULTIPLE,
            "n": max(n, INT8_CUDA_MIN_ROWS),
        }
        extra = {
            name: v
            for name, v, orig in (("m", padded["m"], m), ("n", padded["n"], n), ("k", padded["k"], k))
            if v != orig
        }
        return padded["m"], padded["n"], padded["k"], extra

    def synchronize(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.device)
