"""The cuDNN backend: a handle, a workspace, the race apart and the engine cache for conv.py; its options
and info are declared in declaration.py (importable without cuDNN)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ...catalog import Kernel
from ...precision import Precision
from ..contract.base import Prepared
from ..gpu.cuda.native import NativeCudaBackend, StreamHandle
from . import conv
from .declaration import CUDNN
from .engine_cache import EngineCache, library_key
from .race_apart import RaceApart


class Handle(StreamHandle):
    """A cuDNN handle on torch's current stream."""

    def __init__(self, cudnn: Any) -> None:
        super().__init__(cudnn.create_handle())
        self.cudnn = cudnn

    def on_stream(self, stream: int) -> None:
        self.cudnn.set_stream(handle=self.handle, stream=stream)


class CudnnBackend(NativeCudaBackend):
    name = "cudnn"
    binding = ("cudnn", "nvidia-cudnn-frontend")
    operations = ("conv",)
    _race_apart: RaceApart | None = None
    # (layout, why) this process prepares convolutions in instead of --layout's first: the other
    # layout of --layout both, and the layout the race apart is asked to race in.
    layout: tuple[str, str] | None = None

    @contextmanager
    def in_layout(self, layout: str, why: str) -> Iterator[None]:
        """Convolutions prepared meanwhile run in `layout` (`why` is recorded with it)."""
        before, self.layout = self.layout, (layout, why)
        try:
            yield
        finally:
            self.layout = before

    def prepare_op(self, kernel: Kernel, precision: Precision) -> Prepared:
        return conv.prepare(self, kernel, precision)  # type: ignore[arg-type]

    @property
    def engine_cache(self) -> EngineCache | None:
        """The engine cache --engine-cache names, for this GPU model and these libraries (None: off), opened
        on first use; in the measuring process too, where the race is apart: its refusals are the run's."""
        return self.open_engine_cache()

    def open_engine_cache(self) -> EngineCache | None:
        """`engine_cache`, opened (its file read) on the first call."""
        if not hasattr(self, "_engine_cache"):
            assert self.lib is not None  # prepare() refused the kernel otherwise
            options = CUDNN.options_of(self.settings)
            props = torch.cuda.get_device_properties(self.ctx.device)
            library = library_key(
                props.name,
                f"{props.major}.{props.minor}",
                str(self.lib.backend_version()),
                str(getattr(self.lib, "__version__", "")),
            )
            self._engine_cache: EngineCache | None = EngineCache.open(options.engine_cache, library)
        return self._engine_cache

    def device_facts_after(self) -> dict[str, Any]:
        """Where the engine cache was, and a warning for each of its files that was refused."""
        facts = super().device_facts_after()
        cache = getattr(self, "_engine_cache", None)
        if cache is None:
            return facts
        refused = cache.warnings()
        facts["engine_cache"] = {"folder": str(cache.user.folder) if cache.user else "off"}
        if refused:
            facts["engine_cache"]["refused"] = refused
            facts["warnings"] = [f"engine cache: {line} (searched instead)" for line in refused]
        return facts

    @property
    def race_apart(self) -> RaceApart:
        """The process of its own that races engines (--engine-race apart), started on first use."""
        if self._race_apart is None:
            self._race_apart = RaceApart(self.settings)
        return self._race_apart

    def close(self) -> None:
        if self._race_apart is not None:
            self._race_apart.close()

    @property
    def handle(self) -> Handle:
        if getattr(self, "_handle", None) is None:
            self._handle = Handle(self.lib)
        return self._handle

    def workspace_for(self, nbytes: int) -> torch.Tensor:
        """A workspace of at least `nbytes`, kept and grown as plans need (never shrunk within a
        kernel: its parts' calls hold the buffer they were given)."""
        current: torch.Tensor | None = getattr(self, "_workspace", None)
        if current is None or current.numel() < nbytes:
            current = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=self.ctx.device)
            self._workspace: torch.Tensor | None = current
        return current

    def library_versions(self) -> dict[str, str]:
        versions = super().library_versions()
        if self.lib is not None:
            versions["cudnn-frontend"] = str(getattr(self.lib, "__version__", ""))
            versions["cudnn_backend"] = str(self.lib.backend_version())
        return versions

    def release(self) -> None:
        super().release()
        self._workspace = None
