"""Each collective's data, calls and exact expected result on one rank, for any library.

A `Problem` is one kernel on one communicator: its buffers (nccl-tests' layout,
kernels/collective_kernels.py), the out-of-place call and, where the collective has one, the in-place
call (the output buffer holds this rank's input at nccl-tests' offset), and what this rank must
hold afterwards. Inputs are seeded random integers 1..VALUE_MAX in float32 (common.rank_values), so
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


def problem(kernel: CollectiveKernel, comm: Any, seed: int) -> Problem:
    """The kernel's problem on `comm` (a common.Communicator) for this rank."""
    n, rank = comm.size, comm.rank
    layout = kernel.layout(n)
    return _BUILDERS[kernel.op](kernel, comm, layout, n, rank, seed)


def _sum(floats: int, n: int, seed: int) -> np.ndarray:
    """The exact sum of every rank's input (integers well below 2**24)."""
    total = np.zeros(floats, dtype=np.float32)
    for r in range(n):
        total += rank_values(floats, r, seed)
    return total


def _all_reduce(kernel: CollectiveKernel, comm: Any, layout: Layout, n: int, rank: int, seed: int) -> Problem:
    mine = rank_values(layout.send, rank, seed)
    return Problem(layout, mine, _sum(layout.send, n, seed), comm.all_reduce, comm.all_reduce_in_place,
                   lambda: mine)


def _all_gather(kernel: CollectiveKernel, comm: Any, layout: Layout, n: int, rank: int, seed: int) -> Problem:
    shares = [rank_values(layout.count, r, seed) for r in range(n)]
    whole = np.concatenate(shares)

    def in_place_values() -> np.ndarray:  # nccl-tests: this rank's share at rank * count, the rest zero
        buf = np.zeros(layout.recv, dtype=np.float32)
        buf[rank * layout.count:(rank + 1) * layout.count] = shares[rank]
        return buf

    return Problem(layout, shares[rank], whole, comm.all_gather,
                   lambda buf: comm.all_gather_in_place(buf, layout.count), in_place_values)


def _reduce_scatter(kernel: CollectiveKernel, comm: Any, layout: Layout, n: int, rank: int, seed: int) -> Problem:
    mine = rank_values(layout.send, rank, seed)
    total = _sum(layout.send, n, seed)
    return Problem(layout, mine, total[rank * layout.count:(rank + 1) * layout.count], comm.reduce_scatter,
                   lambda buf: comm.reduce_scatter_in_place(buf, layout.count), lambda: mine)


def _broadcast(kernel: CollectiveKernel, comm: Any, layout: Layout, n: int, rank: int, seed: int) -> Problem:
    root = rank_values(layout.send, ROOT, seed)
    mine = root if rank == ROOT else np.zeros(layout.send, dtype=np.float32)  # nccl-tests: only the root's data
    return Problem(layout, mine, root, lambda s, r: comm.broadcast(s, r, ROOT),
                   lambda buf: comm.broadcast_in_place(buf, ROOT), lambda: mine)


def _reduce(kernel: CollectiveKernel, comm: Any, layout: Layout, n: int, rank: int, seed: int) -> Problem:
    mine = rank_values(layout.send, rank, seed)
    expected = _sum(layout.send, n, seed) if rank == ROOT else None
    return Problem(layout, mine, expected, lambda s, r: comm.reduce(s, r, ROOT),
                   lambda buf: comm.reduce_in_place(buf, ROOT), lambda: mine)


def _all_to_all(kernel: CollectiveKernel, comm: Any, layout: Layout, n: int, rank: int, seed: int) -> Problem:
    c = layout.count
    sent = [rank_values(layout.send, r, seed) for r in range(n)]
    # share `rank` of every rank's buffer, in rank order
    expected = np.concatenate([s[rank * c:(rank + 1) * c] for s in sent])
    return Problem(layout, sent[rank], expected, comm.all_to_all, None, None)


def _sendrecv(kernel: CollectiveKernel, comm: Any, layout: Layout, n: int, rank: int, seed: int) -> Problem:
    after, before = (rank + 1) % n, (rank - 1) % n
    mine = rank_values(layout.send, rank, seed)
    return Problem(layout, mine, rank_values(layout.recv, before, seed),
                   lambda s, r: comm.send_recv(s, r, after, before), None, None)


_BUILDERS: dict[str, Callable[..., Problem]] = {
    "all_reduce": _all_reduce, "all_gather": _all_gather, "reduce_scatter": _reduce_scatter,
    "broadcast": _broadcast, "reduce": _reduce, "all_to_all": _all_to_all, "sendrecv": _sendrecv,
}
