"""What the collective backends declare (backends/declaration.py), importable without torch or NCCL:
how the timed calls of a collective are launched on CUDA (--collective-timing), stored under the
nccl backend's name and read by every collective backend (host buffers are always eager), and the
facts each collective result records (`CollectiveInfo`, `CollectivePartInfo`)."""

from __future__ import annotations

import argparse
from typing import Any, Literal, get_args

from pydantic import Field

from ..declaration import BackendDeclaration, BackendOptions, PartInfo

CollectiveTiming = Literal["graph", "eager"]
COLLECTIVE_TIMINGS: tuple[str, ...] = get_args(CollectiveTiming)


class CollectiveOptions(BackendOptions):
    collective_timing: CollectiveTiming = Field(
        "graph",
        description="CUDA collectives: the timed calls captured in a CUDA graph per rank and replayed "
        "together, timed by events (graph, nccl-tests' -G), or launched one by one from Python and timed by the "
        "host clock (eager); host buffers are always eager (kernels/backends/distributed/common.py)",
    )


class CollectivePartInfo(PartInfo):
    """One direction (in place, out of place) of a collective, as measured on every rank."""

    ranks: int
    bytes: int
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    time_max_over_ranks_us: float | None = None


class CollectiveInfo(PartInfo):
    """A collective's result: the library that ran it, on how many ranks, how it was timed, and the
    out-of-place twin of an in-place measurement."""

    ranks: int
    library: str | None = None
    bytes: int | None = None
    timing: str = ""
    out_of_place: dict[str, Any] | None = None

    @property
    def out_of_place_median(self) -> float | None:
        """The out-of-place twin's median (us), where it was measured."""
        return (self.out_of_place or {}).get("measurement", {}).get("stats", {}).get("median")


class CollectiveDeclaration(BackendDeclaration[CollectiveOptions]):
    part_info = CollectivePartInfo

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--collective-timing",
            choices=COLLECTIVE_TIMINGS,
            default=CollectiveOptions.model_fields["collective_timing"].default,
            help="GPU collectives: graph (default) captures the timed calls in a CUDA graph per rank and "
            "replays them together, timed by events, as nccl-tests -G does; eager launches each call "
            "from Python and times the loop by the host clock",
        )

    def options_from(self, args: argparse.Namespace) -> CollectiveOptions:
        return CollectiveOptions(collective_timing=args.collective_timing)

    def to_args(self, options: CollectiveOptions) -> list[str]:
        return [] if options.collective_timing == "graph" else ["--collective-timing", options.collective_timing]


COLLECTIVES = CollectiveDeclaration("nccl", CollectiveOptions, title="nccl, rccl backends (collectives)")
