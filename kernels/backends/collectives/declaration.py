"""What the collective layer declares for its backends (gloo/, nccl/, mpi/), importable without torch or
NCCL: how the timed calls of a collective are launched on CUDA
(--collective-timing), stored under the nccl backend's name and read by every collective backend (host
buffers are always eager); the facts each collective result records (`CollectiveInfo`,
`CollectivePartInfo`); the engines that start their ranks (`TORCHRUN`, `MPIRUN`); and the most ranks
the exact check can sum."""

from __future__ import annotations

import argparse
import statistics
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...results import Measurement
from ..contract.declaration import BackendDeclaration, BackendOptions, Launcher, PartInfo, add_choice

US_PER_S = 1e6
# Values on each rank are integers in [1, VALUE_MAX] (values.py): sums of up to 2**24 / VALUE_MAX ranks
# are exact in float32, and they are never zeros or constants.
VALUE_MAX = 8
MAX_EXACT_RANKS = 2**24 // VALUE_MAX
# The engines that start collective ranks (runner/launch/ranks/engines.py drives them): torchrun meets its ranks
# at MASTER_ADDR:MASTER_PORT across nodes; mpirun (mpiexec) through its own launcher.
# In a container with no network but the loopback, torchrun's ranks must keep their sockets on it (gloo
# carries every rank's control messages, NCCL its bootstrap); MPICH's ranks copy through shared memory
# instead of process_vm_readv (CMA), which needs CAP_SYS_PTRACE, a capability the container lacks.
TORCHRUN = Launcher(
    "torchrun",
    "torch.distributed.run",
    ("MASTER_ADDR", "MASTER_PORT"),
    (("GLOO_SOCKET_IFNAME", "lo"), ("NCCL_SOCKET_IFNAME", "lo")),
)
MPIRUN = Launcher("mpirun", container_env=(("OMP_NUM_THREADS", "1"), ("MPIR_CVAR_CH4_CMA_ENABLE", "0")), always=True)

CollectiveTiming = Literal["graph", "eager"]
# How nccl4py's communicators are configured (nccl4py_comm.py): as nccl-tests configures its own,
# or with NCCL's defaults (what a framework gets that sets nothing).
CommConfig = Literal["nccl-tests", "nccl-defaults"]
COMM_CONFIG_FLAG_DEFAULT = "nccl-tests"  # what a new run asks for; the field's default is what older runs did


class CollectiveOptions(BackendOptions):
    collective_timing: CollectiveTiming = Field(
        "graph",
        description="CUDA collectives: the timed calls captured in a CUDA graph per rank and replayed "
        "together, timed by events (graph, nccl-tests' -G), or launched one by one from Python and timed by the "
        "host clock (eager); host buffers are always eager (kernels/backends/collectives/common.py)",
    )
    comm_config: CommConfig = Field(
        "nccl-defaults",
        description="nccl4py communicators configured as nccl-tests configures its own (nvlinkCentricSched=1 "
        "on NCCL 2.28.2 and later: nccl-tests' src/common.cu initComms), or with NCCL's defaults (absent "
        "from runs made before the option: they ran with NCCL's defaults; --nccl-comm-config's default is "
        "nccl-tests)",
    )


class CollectivePartInfo(PartInfo):
    """One direction (in place, out of place) of a collective, as measured on every rank."""

    ranks: int | None = None
    bytes: int | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    bus_factor: float | None = None
    time_max_over_ranks_us: float | None = None
    time_mean_over_ranks_us: float | None = None  # what nccl-tests' -a 1 reports (nccl_tests_side_by_side.py)
    time_per_rank_us: list[float] | None = None  # each rank's mean time per call, rounded (collective_figures)
    timed_calls: int | None = None
    repeat_cap: int | None = None


def collective_figures(
    m: Measurement, per_rank: list[list[float]], nbytes: int, bus_factor: float, max_calls: int
) -> dict[str, Any]:
    """What a collective part's info records of its samples (nccl-tests' figures), from the same samples
    its statistics are of (a stalled one left out: kernels/stalls.py): each rank's mean time per call,
    their mean and maximum, the algorithm bandwidth S/t at the median and the bus bandwidth."""
    left_out = set(m.stalled)
    means = [statistics.fmean([t for i, t in enumerate(ts) if i not in left_out]) for ts in per_rank]
    algbw = nbytes / (m.stats.median / US_PER_S) / 1e9  # nccl-tests: S / t
    return {
        "time_per_rank_us": [round(x, 3) for x in means],
        "time_mean_over_ranks_us": statistics.fmean(means),
        "time_max_over_ranks_us": max(means),
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * bus_factor,
        "timed_calls": len(m.samples_us) * m.calls_per_sample,
        "repeat_cap": max_calls,
    }


class OutOfPlace(BaseModel):
    """The out-of-place twin measured beside an in-place part (info.out_of_place)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    direction: str = "out_of_place"
    measurement: dict[str, Any] = {}
    info: dict[str, Any] = {}

    @property
    def median(self) -> float | None:
        return self.measurement.get("stats", {}).get("median")


class CollectiveInfo(PartInfo):
    """A collective's result: the library that ran it, on how many ranks, how it was timed, and the
    out-of-place twin of an in-place measurement."""

    ranks: int | None = None
    library: str | dict[str, Any] | None = None
    bytes: int | None = None
    timing: str = ""
    comm_config: str = ""  # the communicator's NCCL configuration, as nccl4py_comm.py set it
    out_of_place: OutOfPlace | None = None

    def library_name(self, backend: str) -> str:
        """The communication library (an older record's dict names it as collective_library)."""
        if isinstance(self.library, dict):
            return str(self.library.get("collective_library", backend))
        return self.library or backend

    @property
    def twin(self) -> OutOfPlace | None:
        """The out-of-place twin, where one was measured with its info."""
        return self.out_of_place if self.out_of_place is not None and self.out_of_place.info else None


class CollectiveDeclaration(BackendDeclaration[CollectiveOptions]):
    """A collective backend whose options are the collective layer's (stored under `nccl`)."""

    part_info = CollectivePartInfo
    launcher = TORCHRUN
    max_ranks = MAX_EXACT_RANKS

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        add_choice(
            group,
            "--collective-timing",
            CollectiveOptions,
            "collective_timing",
            "GPU collectives: graph (default) captures the timed calls in a CUDA graph per rank and "
            "replays them together, timed by events, as nccl-tests -G does; eager launches each call "
            "from Python and times the loop by the host clock",
        )
        add_choice(
            group,
            "--nccl-comm-config",
            CollectiveOptions,
            "comm_config",
            "GPU collectives through nccl4py: nccl-tests (default) configures the communicators as nccl-tests "
            "does (nvlinkCentricSched=1 on NCCL 2.28.2 and later), so that its figures compare like with like; "
            "nccl-defaults leaves NCCL's own defaults, as a framework that sets nothing gets them",
            default=COMM_CONFIG_FLAG_DEFAULT,
        )

    def options_from(self, args: argparse.Namespace) -> CollectiveOptions:
        return CollectiveOptions(collective_timing=args.collective_timing, comm_config=args.nccl_comm_config)

    def to_args(self, options: CollectiveOptions) -> list[str]:
        args = [] if options.collective_timing == "graph" else ["--collective-timing", options.collective_timing]
        flag = [] if options.comm_config == COMM_CONFIG_FLAG_DEFAULT else ["--nccl-comm-config", options.comm_config]
        return args + flag


COLLECTIVES = CollectiveDeclaration("nccl", CollectiveOptions, title="nccl, rccl backends (collectives)")
