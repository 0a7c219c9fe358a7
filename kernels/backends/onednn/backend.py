"""The oneDNN backend's class: the library loaded (binding.py), its threads limited (threads.py), one
CPU engine and stream, and each operation's module (OPERATIONS), timed by the CPU layer
(cpu/runtime.py). Without oneDNN, or where it cannot load or has no CPU engine, the backend still
loads and every kernel is unsupported with the one line that says what is missing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

from ...catalog import Kernel
from ...noise import quiet_threads
from ...precision import Precision
from ...results import Settings
from ..contract.base import Prepared, Unsupported
from ..cpu.runtime import CpuRuntimeBackend, physical_cores
from . import conv, matmul, rnn
from .binding import DnnlError, load, text
from .context import OnednnContext
from .declaration import ONEDNN
from .threads import Threading, limit

OPERATIONS: dict[str, Callable[[OnednnContext, Any, Precision], Prepared]] = {
    "conv": conv.prepare,
    "rnn": rnn.prepare,
    "batched_gemm": matmul.prepare,  # matmul.py: MKL has no batched GEMM in bf16, fp16 or int8
}
WHEELS = ("onednn", "tbb", "intel-sycl-rt", "intel-opencl-rt")  # the packages whose versions a run records


class OnednnBackend(CpuRuntimeBackend):
    name = "onednn"
    operations: ClassVar[Mapping[str, Callable[[Any, Any, Precision], Prepared]]] = OPERATIONS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        loaded = load(ONEDNN.install_hint)
        self.lib, self.folder, self.missing = loaded.lib, loaded.folder, loaded.missing
        self.threading: Threading | None = None
        if self.lib is None:
            return
        runtime = self.lib.dnnl_version().contents.cpu_runtime
        self.threading = limit(runtime, text(self.lib.dnnl_runtime2str(runtime)), self.threads)
        try:
            self.context = OnednnContext(self.lib, ONEDNN.options_of(settings), settings.seed, settings.inputs)
        except DnnlError as exc:
            devices = self.lib.dnnl_engine_get_count(1)
            self.missing = (
                f"oneDNN loads but gives no CPU engine ({exc}; {devices} CPU devices for its "
                f"{self.threading.runtime} runtime)"
            )
            self.lib = None
            return
        self.context.facts.update(
            isa=self.context.isa_name,
            runtime=self.threading.runtime,
            threading=self.threading.threading,
            threads=self.threading.threads,
        )

    def default_threads(self) -> int:
        """Settings.threads unset: one thread per physical core, as Intel advises for oneDNN (hyperthreads
        share a core's vector units); less the cores other processes keep busy."""
        return quiet_threads(cores=physical_cores())

    def covers(self, kernel: Kernel, precision: Precision) -> bool:
        return self.lib is not None and kernel.op in self.operations

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if self.lib is None:
            raise Unsupported(f"the onednn backend cannot run here: {self.missing}")
        return super().prepare(kernel, precision).in_precision(precision)

    def library_versions(self) -> dict[str, str]:
        versions: dict[str, str] = {}
        if self.lib is not None:
            v = self.lib.dnnl_version().contents
            versions["oneDNN"] = f"{v.major}.{v.minor}.{v.patch}"
            versions["oneDNN_commit"] = text(v.hash)
        for wheel in WHEELS:
            try:
                versions[wheel] = version(wheel)
            except PackageNotFoundError:
                continue
        return versions

    def runtime_facts(self) -> dict[str, Any]:
        if self.lib is None or self.threading is None:
            return {"onednn": {"unavailable": self.missing}}
        return {
            "onednn": {
                "library": f"{self.folder}/libdnnl.so.3" if self.folder else "libdnnl.so.3",
                "isa": self.context.isa_name,
                "cpu_runtime": self.threading.runtime,
                "threading": self.threading.threading,
                "threads": self.threading.threads,
                "threads_set_by": self.threading.how,
            }
        }
