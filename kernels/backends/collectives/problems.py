"""Each collective's data, calls and exact expected result on one rank, for any library.

A `Problem` is one kernel on one communicator: its buffers (nccl-tests' layout,
kernels/collective_kernels.py), the out-of-place call and, where the collective has one, the in-place
call (the output buffer holds this rank's input at nccl-tests' offset), and what this rank must
hold afterwards. Inputs are seeded random integers 1..VALUE_MAX in float32 (values.rank_values), so
every sum is exact and every rank can compute every other rank's input: the expected result is
computed on the host, element for element, and compared exactly.

Which call a library makes for which collective is the communicator's (torch_dist.py, mpi.py,
nccl4py_comm.py); this module only says what goes in and what must come out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...collective_kernels import ROOT, CollectiveKernel, Layout
from .values import rank_values

# A call on (send, recv) buffers out of place, or on the one buffer in place; each returns the view of
# the buffer that holds the result.
OutOfPlace = Callable[[Any, Any], Any]
InPlace = Callable[[Any], Any]


@dataclass
class Problem:
    """One rank's side of one collective kernel (buffers are the communicator's)."""

    layout: Layout
    inputs: np.ndarray  # this rank's input (layout.send elements)
    expected: np.ndarray | None  # what this rank's result must hold (None: nothing defined here)
    out_of_place: OutOfPlace
    in_place: InPlace | None
    in_place_buffer: Callable[[], np.ndarray] | None  # host values of the in-place buffer before the call


# values(floats, rank, part): the input of `rank` (its share `part` where the collective splits it, else -1)
Values = Callable[[int, int, int], np.ndarray]


def problem(kernel: CollectiveKernel, comm: Any, seed: int, data: bool = True) -> Problem:
    """The kernel's problem on `comm` (a common.Communicator) for this rank; `data=False` (a warm-up)
    fills the buffers with zeros and makes no expected result worth checking."""
    n, rank = comm.size, comm.rank
    layout = kernel.layout(n)

    def values(floats: int, of_rank: int, part: int) -> np.ndarray:
        if not data:
            return np.zeros(floats, dtype=np.float32)
        return rank_values(floats, of_rank, seed, part)

    return _BUILDERS[kernel.op](comm, layout, n, rank, values)


def _sum(floats: int, n: int, values: Values, part: int = -1) -> np.ndarray:
    """The exact sum of every rank's input (or share `part` of it): integers well below 2**24."""
    total = np.zeros(floats, dtype=np.float32)
    for r in range(n):
        total += values(floats, r, part)
    return total


def _shares(layout: Layout, n: int, of_rank: int, values: Values) -> np.ndarray:
    """A rank's input made of n shares, each seeded apart, so that a rank computes one share of another
    rank's input without the whole of it (host memory stays a buffer's size on many ranks)."""
    return np.concatenate([values(layout.count, of_rank, j) for j in range(n)])


def _all_reduce(comm: Any, layout: Layout, n: int, rank: int, values: Values) -> Problem:
    mine = values(layout.send, rank, -1)
    return Problem(layout, mine, _sum(layout.send, n, values), comm.all_reduce, comm.all_reduce_in_place, lambda: mine)


def _all_gather(comm: Any, layout: Layout, n: int, rank: int, values: Values) -> Problem:
    whole = np.concatenate([values(layout.count, r, -1) for r in range(n)])
    mine = whole[rank * layout.count : (rank + 1) * layout.count]

    def in_place_values() -> np.ndarray:  # nccl-tests: this rank's share at rank * count, the rest zero
        buf = np.zeros(layout.recv, dtype=np.float32)
        buf[rank * layout.count : (rank + 1) * layout.count] = mine
        return buf

    return Problem(
        layout, mine, whole, comm.all_gather, lambda buf: comm.all_gather_in_place(buf, layout.count), in_place_values
    )


def _reduce_scatter(comm: Any, layout: Layout, n: int, rank: int, values: Values) -> Problem:
    mine = _shares(layout, n, rank, values)
    return Problem(
        layout,
        mine,
        _sum(layout.count, n, values, part=rank),
        comm.reduce_scatter,
        lambda buf: comm.reduce_scatter_in_place(buf, layout.count),
        lambda: mine,
    )


def _broadcast(comm: Any, layout: Layout, n: int, rank: int, values: Values) -> Problem:
    root = values(layout.send, ROOT, -1)
    mine = root if rank == ROOT else np.zeros(layout.send, dtype=np.float32)  # nccl-tests: only the root's data
    return Problem(
        layout,
        mine,
        root,
        lambda s, r: comm.broadcast(s, r, ROOT),
        lambda buf: comm.broadcast_in_place(buf, ROOT),
        lambda: mine,
    )


def _reduce(comm: Any, layout: Layout, n: int, rank: int, values: Values) -> Problem:
    mine = values(layout.send, rank, -1)
    expected = _sum(layout.send, n, values) if rank == ROOT else None
    return Problem(
        layout,
        mine,
        expected,
        lambda s, r: comm.reduce(s, r, ROOT),
        lambda buf: comm.reduce_in_place(buf, ROOT),
        lambda: mine,
    )


def _all_to_all(comm: Any, layout: Layout, n: int, rank: int, values: Values) -> Problem:
    # share `rank` of every rank's input, in rank order
    expected = np.concatenate([values(layout.count, r, rank) for r in range(n)])
    return Problem(layout, _shares(layout, n, rank, values), expected, comm.all_to_all, None, None)


def _sendrecv(comm: Any, layout: Layout, n: int, rank: int, values: Values) -> Problem:
    after, before = (rank + 1) % n, (rank - 1) % n
    return Problem(
        layout,
        values(layout.send, rank, -1),
        values(layout.recv, before, -1),
        lambda s, r: comm.send_recv(s, r, after, before),
        None,
        None,
    )


_BUILDERS: dict[str, Callable[..., Problem]] = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "broadcast": _broadcast,
    "reduce": _reduce,
    "all_to_all": _all_to_all,
    "sendrecv": _sendrecv,
}
