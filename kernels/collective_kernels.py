"""The collectives as kernels: all-reduce (DeepBench's) and all-gather, reduce-scatter, broadcast,
reduce, all-to-all and send/recv (nccl-tests'), each describing itself the way nccl-tests defines it.

A kernel's size is nccl-tests' size: `floats` float32 elements, the larger of the two buffers a rank
hands the library (nccl-tests' `-b/-e` bytes / 4). How a rank's buffers follow from it on n ranks is
the class's `layout` (nccl-tests' src/<collective>.cu GetCollByteCount): all-gather, reduce-scatter
and all-to-all give each rank `floats/n` elements rounded down to 16 bytes, so the size a run moves
is recorded beside the kernel (`Layout.bytes`). Bandwidths follow nccl-tests' doc/PERFORMANCE.md:
algbw = S / t with S = Layout.bytes, busbw = algbw * the class's bus factor. All are sums over
float32 (reduce and broadcast from root 0), as nccl-tests runs them by default.

In place and out of place: all-reduce, all-gather, reduce-scatter, broadcast and reduce have both
(in place: the output buffer holds the input at nccl-tests' offset); all-to-all and send/recv have
out of place only (nccl-tests runs their in-place call unchecked, and NCCL defines none)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import Field

from . import costs
from .kernel import Kernel
from .op_traits import OpTraits, Rate
from .precision import Precision

# nccl-tests rounds a per-rank share down to 16 bytes (`& ~(16/eltSize - 1)`): 4 float32 elements.
ALIGN_FLOATS = 16 // costs.FLOAT32_BYTES
ROOT = 0  # nccl-tests' default root (-r 0) for broadcast and reduce


@dataclass(frozen=True)
class Layout:
    """One rank's buffers for a kernel on `ranks` ranks, in float32 elements: `count` is
    nccl-tests' count column (elements per rank's share), `send` and `recv` the buffers' sizes."""

    count: int
    send: int
    recv: int

    @property
    def bytes(self) -> int:
        """nccl-tests' size column: the larger buffer, in bytes (algbw = bytes / time)."""
        return max(self.send, self.recv) * costs.FLOAT32_BYTES


def _share(floats: int, ranks: int) -> int:
    """Each rank's share of a size split over the ranks, rounded down to 16 bytes (nccl-tests)."""
    return (floats // ranks) & ~(ALIGN_FLOATS - 1)


class CollectiveKernel(Kernel):
    """A sum-collective of `floats` float32 elements, timed at most `repeat` times."""

    FIELDS: ClassVar[tuple[str, ...]] = ("floats", "repeat")
    # Whether the collective has an in-place form (the output buffer holds this rank's input).
    IN_PLACE: ClassVar[bool] = True
    # Whether only the root's result is defined (reduce).
    ROOTED: ClassVar[bool] = False
    floats: int = Field(gt=0)
    repeat: int = Field(gt=0)

    def flops(self, direction: str = "fwd") -> float:
        return 0.0

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return float(self.floats * costs.FLOAT32_BYTES)

    def layout(self, ranks: int) -> Layout:
        """nccl-tests' buffers for one rank (same size in and out unless a subclass says)."""
        return Layout(count=self.floats, send=self.floats, recv=self.floats)

    def bus_factor(self, ranks: int) -> float:
        """busbw / algbw on `ranks` ranks (nccl-tests' doc/PERFORMANCE.md); 0 on one rank,
        where nothing crosses a link."""
        return 1.0 if ranks > 1 else 0.0


def _traits(title: str) -> OpTraits:
    return OpTraits(
        title,
        rated_in=Rate.GBPS,
        collective=True,
        fixed_precision="fp32",
        field_headers={"floats": "Size # floats", "repeat": "Repeat"},
    )


class AllReduceKernel(CollectiveKernel):
    """Sum-all-reduce of `floats` float32 elements; DeepBench repeated it `repeat` times."""

    TRAITS: ClassVar[OpTraits | None] = _traits("All-reduce")
    op: Literal["all_reduce"] = "all_reduce"

    def min_bytes(self, direction: str, precision: Precision) -> float:
        return costs.all_reduce_bytes(self.floats)

    def bus_factor(self, ranks: int) -> float:
        return costs.bus_bandwidth_factor(ranks)


class _SplitKernel(CollectiveKernel):
    """A collective whose ranks each own a share of the size: (n-1)/n of it crosses links."""

    def bus_factor(self, ranks: int) -> float:
        return (ranks - 1) / ranks if ranks > 1 else 0.0


class AllGatherKernel(_SplitKernel):
    """Every rank sends its share and receives all n shares (size = the received buffer)."""

    TRAITS: ClassVar[OpTraits | None] = _traits("All-gather")
    op: Literal["all_gather"] = "all_gather"

    def layout(self, ranks: int) -> Layout:
        base = _share(self.floats, ranks)
        return Layout(count=base, send=base, recv=base * ranks)


class ReduceScatterKernel(_SplitKernel):
    """Every rank sends n shares and receives the sum of its own share (size = the sent buffer)."""

    TRAITS: ClassVar[OpTraits | None] = _traits("Reduce-scatter")
    op: Literal["reduce_scatter"] = "reduce_scatter"

    def layout(self, ranks: int) -> Layout:
        base = _share(self.floats, ranks)
        return Layout(count=base, send=base * ranks, recv=base)


class AllToAllKernel(_SplitKernel):
    """Every rank sends share j of its buffer to rank j (size = either buffer)."""

    TRAITS: ClassVar[OpTraits | None] = _traits("All-to-all")
    IN_PLACE: ClassVar[bool] = False
    op: Literal["all_to_all"] = "all_to_all"

    def layout(self, ranks: int) -> Layout:
        base = _share(self.floats, ranks)
        return Layout(count=base, send=base * ranks, recv=base * ranks)


class BroadcastKernel(CollectiveKernel):
    """Root 0's buffer copied to every rank."""

    TRAITS: ClassVar[OpTraits | None] = _traits("Broadcast")
    op: Literal["broadcast"] = "broadcast"


class ReduceKernel(CollectiveKernel):
    """The sum over ranks, on root 0 only."""

    TRAITS: ClassVar[OpTraits | None] = _traits("Reduce")
    ROOTED: ClassVar[bool] = True
    op: Literal["reduce"] = "reduce"


class SendRecvKernel(CollectiveKernel):
    """Ring pairs: each rank sends its buffer to rank+1 and receives rank-1's, at once."""

    TRAITS: ClassVar[OpTraits | None] = _traits("Send/recv")
    IN_PLACE: ClassVar[bool] = False
    op: Literal["sendrecv"] = "sendrecv"


# Report order: DeepBench's all-reduce, then nccl-tests' order of the others.
COLLECTIVE_KERNELS: tuple[type[CollectiveKernel], ...] = (
    AllReduceKernel,
    AllGatherKernel,
    ReduceScatterKernel,
    BroadcastKernel,
    ReduceKernel,
    AllToAllKernel,
    SendRecvKernel,
)
# The same, after DeepBench's all-reduce (the catalog lists that one with DeepBench's operations).
NCCL_TESTS_KERNELS = COLLECTIVE_KERNELS[1:]
COLLECTIVES_BY_OP: dict[str, type[CollectiveKernel]] = {
    cls.model_fields["op"].default: cls for cls in COLLECTIVE_KERNELS
}
