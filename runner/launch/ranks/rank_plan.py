"""The ranks a run asks for (`--ranks`, `--launch`) and the backend a plan of several ranks runs on:
several ranks run the collectives only, on a collective backend (the one asked for, or the one the
backend's declaration names for the platform's device)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from deepbench.kernels.backends import declaration_of
from deepbench.kernels.catalog import Kernel, operations, traits_of

from ...errors import UserError
from ...option_types import integer
from ...setting_ranges import MAX_RANKS
from .engines import collective_backends

if TYPE_CHECKING:
    from deepbench.kernels.results import Plan

    from ...platforms import Platform


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    engines = "; ".join(f"{engine} (--backend {'/'.join(names)})" for engine, names in collective_backends().items())
    g = parser.add_argument_group("collectives (all-reduce, all-gather, ...: --suite collectives)")
    g.add_argument(
        "--ranks",
        type=integer(1, MAX_RANKS),
        default=1,
        metavar="N",
        help="processes for the collectives on this node: one per GPU, or N CPU processes (default 1); "
        f"started by {engines}; the platform's backend picks its device's collective backend",
    )
    g.add_argument(
        "--launch",
        metavar="COMMAND",
        help="with --resume OUT: start the ranks across nodes with COMMAND, as `deepbench "
        "launch-command` prints it (srun/mpirun ... -m deepbench.kernels.harness PLAN OUT), "
        "with the progress, per-kernel timeout and restarts of a local run",
    )


def plan_backend(backend: str, ranks: int, platform: Platform, kernels: Sequence[Kernel]) -> str:
    """The backend a plan names for `backend` (asked for, or the platform's) on `ranks` ranks.
    Several ranks run the collectives only, on a collective backend: the one asked for, or the one
    the backend's declaration names for the platform's device (NCCL on GPUs, gloo on CPUs ...)."""
    if ranks < 1:
        raise UserError(f"--ranks must be at least 1, not {ranks}")
    if ranks == 1:
        return backend
    others = sorted({k.op for k in kernels if not traits_of(k.op).collective})
    if others:
        collectives = ",".join(op for op in operations() if traits_of(op).collective)
        raise UserError(
            f"--ranks {ranks} runs collectives only, and the selection also has {', '.join(others)}: "
            f"add --ops {collectives}"
        )
    declared_ = declaration_of(backend)
    if declared_.launcher is not None:
        return backend
    collective = declared_.collective_backend(platform.device)
    if collective:
        return collective
    names = ", ".join(name for names in collective_backends().values() for name in names)
    raise UserError(f"--ranks needs a collective backend: {names} (not {backend})")


def needs_engine(plan: Plan) -> bool:
    """Whether the harness must be started by an engine (several ranks, or a backend whose engine
    starts even one rank)."""
    launcher = declaration_of(plan.backend).launcher
    return plan.settings.ranks > 1 or (launcher is not None and launcher.always)
