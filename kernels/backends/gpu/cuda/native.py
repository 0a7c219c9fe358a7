"""What the backends that call NVIDIA's libraries directly share: loading their Python bindings
with a reason that says what to install, and the run's GPU.

cuBLAS, cuDNN and cuSPARSE are called through NVIDIA's own maintained bindings (nvmath-python,
nvidia-cudnn-frontend), so the library receives exactly DeepBench's problem; PyTorch provides the
memory and the random inputs (torch_context.py), kernels/reference/ the float64 references, and the
GPU timing engine times the calls (kernels/backends/gpu/cuda/device.py). Without the bindings a native
backend still loads, and reports every kernel `unsupported` with what to install, so a machine
without them (or without a GPU) says why instead of failing."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from importlib import import_module
from types import ModuleType
from typing import Any

from ....catalog import Kernel
from ....padding import PadMode
from ....precision import Precision
from ....results import Measurement, Settings
from ....timing.stopping import StopRule
from ... import declaration_of
from ...contract.base import Backend, Prepared, TimedPart, Unsupported
from ...shared.torch_context import TorchContext
from .device import CudaDevice


def load_binding(module: str, package: str, hint: str) -> tuple[ModuleType | None, str]:
    """(the module, "") or (None, why it cannot be used): a missing package (with `hint`, what to
    install: the backend's declaration says) or a library that cannot load."""
    try:
        return import_module(module), ""
    except ImportError as exc:
        return None, f"{package} is not installed ({exc}); {hint}"
    except Exception as exc:  # noqa: BLE001 - a binding that cannot load its shared library
        return None, f"{package} cannot load: {type(exc).__name__}: {exc}"


def binding_versions() -> dict[str, str]:
    """The version of nvmath-python, the binding cuBLAS and cuSPARSELt are called through."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return {"nvmath-python": version("nvmath-python")}
    except PackageNotFoundError:
        return {}


class StreamHandle:
    """A library handle that follows torch's current stream (a graph capture runs on a side
    stream): re-bound (`on_stream`) only when the stream changes, so that a timed call does no host
    work besides the library call itself."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.stream: int | None = None

    def on_stream(self, stream: int) -> None:
        raise NotImplementedError

    def bind(self) -> Any:
        import torch

        stream = torch.cuda.current_stream().cuda_stream
        if stream != self.stream:
            self.on_stream(stream)
            self.stream = stream
        return self.handle


class NativeCudaBackend(Backend):
    """A backend over one NVIDIA library's own API. Subclasses name their binding and operations
    and implement `prepare_op`; timing, ceilings and facts are the run's `CudaDevice`'s."""

    binding: tuple[str, str] = ("", "")  # (module to import, the PyPI package that provides it)
    operations: tuple[str, ...] = ()

    def __init__(self, settings: Settings, cuda: CudaDevice | None = None) -> None:
        super().__init__(settings)
        self.lib, self.missing = load_binding(*self.binding, declaration_of(self.name).install_hint)
        self.cuda: CudaDevice | None = None
        if self.lib is not None:
            self.cuda = cuda or CudaDevice(settings)
            self.ctx = TorchContext(self.cuda.device, settings.seed, PadMode(settings.pad), settings.inputs)

    def covers(self, kernel: Kernel, precision: Precision) -> bool:
        """Whether this backend runs the kernel in the precision (the `nvidia` backend's choice)."""
        return self.lib is not None and kernel.op in self.operations

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if self.lib is None:
            raise Unsupported(f"the {self.name} backend cannot run here: {self.missing}")
        if kernel.op not in self.operations:
            raise Unsupported(
                f"{kernel.op} is not run by the {self.name} backend (it runs {', '.join(self.operations)})"
            )
        return self.prepare_op(kernel, precision).in_precision(precision)

    def prepare_unpadded(self, kernel: Kernel, precision: Precision) -> Prepared | None:
        with self.ctx.padding(PadMode.NONE):
            return self.prepare(kernel, precision)

    @abstractmethod
    def prepare_op(self, kernel: Kernel, precision: Precision) -> Prepared:
        """Inputs, outputs and the library call for one kernel (its operation is covered)."""

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        assert self.cuda is not None
        return self.cuda.measure(fn, rule, part, part.precision)

    def library_versions(self) -> dict[str, str]:
        return self.cuda.versions() if self.cuda else {}

    def device_facts(self) -> dict[str, Any]:
        return self.cuda.facts() if self.cuda else {"kind": "none", "unavailable": self.missing}

    def ceilings(self, precisions: Iterable[Precision] = ()) -> dict[str, float]:
        return self.cuda.ceilings() if self.cuda else {}

    def release(self) -> None:
        if self.cuda:
            self.cuda.synchronize()
