"""What the torch references need of a backend's context: the device the tensors live on, the
seeded generator that picks sampled points, and random operands.

A protocol, not the context itself (kernels/backends/shared/torch_context.py), so that the reference layer
imports no backend: any context with these members, of any backend, can be checked against it."""

from __future__ import annotations

from typing import Protocol

import torch


class TensorSource(Protocol):
    @property
    def device(self) -> torch.device: ...

    @property
    def generator(self) -> torch.Generator: ...

    def random(
        self, shape: tuple[int, ...], dtype: torch.dtype, scale: float = 1.0, narrow: bool | None = None
    ) -> torch.Tensor: ...
