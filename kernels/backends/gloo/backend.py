"""The gloo backend (`--backend gloo`): collectives through torch.distributed's gloo process group, on
host buffers: what several CPU ranks use."""

from __future__ import annotations

from ..collectives.torch_backend import TorchDistributedBackend


class GlooBackend(TorchDistributedBackend):
    pg_backend = "gloo"
