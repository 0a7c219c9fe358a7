"""Fault injection, for tests of what the host does when a kernel kills the harness.

DEEPBENCH_FAULT="crash:ID" kills the harness (SIGKILL, as the out-of-memory killer would) when it
starts the kernel whose id starts with ID; "hang:ID" makes that kernel sleep forever; "oom:ID"
allocates host memory until the process dies; "unavailable:" makes the backend fail to load (as
a rank whose communicator cannot be set up does), "unavailable-once:" only on the first start in
a results folder. Unset in normal runs: it does nothing then."""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

ENV = "DEEPBENCH_FAULT"
# With several ranks (all-reduce), DEEPBENCH_FAULT_RANK=R limits the fault to rank R, so that
# ranks disagree; "wrong:ID" then makes that rank's all-reduce check see one wrong element.
RANK_ENV = "DEEPBENCH_FAULT_RANK"


def _this_rank_is_targeted(rank: int | None = None) -> bool:
    wanted = os.environ.get(RANK_ENV, "")
    if not wanted:
        return True
    if rank is None:
        from .ranks import launch_rank

        rank = launch_rank().rank
    return int(wanted) == rank


def requested(kind: str, item_id: str, rank: int | None = None) -> bool:
    """Whether the fault `kind` is asked for this kernel (id prefix) on this rank."""
    spec_kind, _, target = os.environ.get(ENV, "").partition(":")
    return spec_kind == kind and item_id.startswith(target) and _this_rank_is_targeted(rank)


def maybe_fail_backend(outdir: Path, rank: int) -> None:
    """Raise as a backend that cannot load would ("unavailable:" and "unavailable-once:")."""
    from pathlib import Path

    marker = Path(outdir) / f".fault-unavailable-once-{rank}"
    if requested("unavailable-once", "", rank):
        if marker.exists():
            return
        marker.write_text("1\n")
    elif not requested("unavailable", "", rank):
        return
    raise RuntimeError(f"{ENV} says rank {rank}'s backend is unavailable (a test's fault)")


def maybe_inject(item_id: str) -> None:
    spec = os.environ.get(ENV, "")
    kind, _, target = spec.partition(":")
    if not spec or not item_id.startswith(target) or not _this_rank_is_targeted():
        return
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    elif kind == "oom":
        hog = []
        while True:
            hog.append(bytearray(1 << 28))
