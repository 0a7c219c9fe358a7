"""The container a run asks for (`deepbench-run` without --local): its option group, and those options
parsed once into a frozen `ContainerOptions` that the container starter (container.py) takes, checked
when they are read so that a wrong --memory or --pids-limit is one line before anything is built,
pulled or written. --env, in the same group, sets the harness's environment wherever it runs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path

from ...errors import UserError

# Threads count as processes here: a rank's OpenMP and PyTorch pools hold about two threads per core,
# so this leaves room for 8 ranks on a 512-core host and still stops a process that forks without end.
DEFAULT_PIDS_LIMIT = 16384
MEMORY_SHARE = 0.9  # of the host's memory, by default: an out-of-memory kill ends the container, not the host's work
NO_LIMIT = ("none", "0")


def add_container_arguments(parser: argparse.ArgumentParser) -> None:
    image = parser.add_argument_group("container (without --local)")
    image.add_argument(
        "--image",
        metavar="REF",
        help="image to run in (default: deepbench/<platform>:<version>, built from images/<vendor>/ when missing)",
    )
    fetch = image.add_mutually_exclusive_group()
    fetch.add_argument("--pull", action="store_true", help="pull the image before running")
    fetch.add_argument("--build", action="store_true", help="(re)build the image before running")
    image.add_argument("--base-image", metavar="IMAGE", help="when building: the base (default: the vendor's)")
    image.add_argument("--wheelhouse", type=Path, metavar="DIR", help="when building: install from DIR, offline")
    image.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory limit of the container, e.g. 8g, or none "
        f"(default: {MEMORY_SHARE * 100:.0f}%% of this host's memory)",
    )
    image.add_argument(
        "--pids-limit",
        type=int,
        metavar="N",
        help=f"processes and threads the container may hold (default {DEFAULT_PIDS_LIMIT}; 0: no limit)",
    )
    image.add_argument(
        "--force-image",
        action="store_true",
        help="run --image even when it is not a deepbench image of this platform and version (its labels)",
    )
    image.add_argument(
        "--env", action="append", metavar="NAME=VALUE", help="environment variable for the harness (repeatable)"
    )


@dataclass(frozen=True)
class ContainerOptions:
    """How the harness's container is made. `memory` None: MEMORY_SHARE of this host's memory ("none"
    lifts it); `pids_limit` None: DEFAULT_PIDS_LIMIT (0 lifts it). Field names are the options' dests:
    what --resume refuses on a local run (CONTAINER_ONLY) is named by them."""

    image: str | None = None
    pull: bool = False
    build: bool = False
    base_image: str | None = None
    wheelhouse: Path | None = None
    memory: str | None = None
    pids_limit: int | None = None
    force_image: bool = False

    def __post_init__(self) -> None:
        check_pids_limit(self.pids_limit)
        check_memory(self.memory)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ContainerOptions:
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


# The options that mean something only in a container (--env sets a local harness's environment too).
CONTAINER_ONLY = tuple(f.name for f in fields(ContainerOptions))


def check_pids_limit(pids_limit: int | None) -> None:
    if pids_limit is not None and pids_limit < 0:
        raise UserError(f"--pids-limit takes a positive number (0: no limit), not {pids_limit}")


def check_memory(memory: str | None) -> None:
    """--memory: a size docker reads (8g, 512m), or none."""
    if memory is None or memory.strip().lower() in NO_LIMIT:
        return
    from docker.errors import DockerException  # here: only a run that sets a limit needs the docker package
    from docker.utils import parse_bytes

    try:
        parse_bytes(memory)
    except DockerException:
        raise UserError(f"--memory takes a size such as 8g or 512m (or none), not '{memory}'") from None


def parse_env(pairs: list[str] | None) -> dict[str, str]:
    """--env's NAME=VALUE pairs."""
    env = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UserError(f"--env takes NAME=VALUE, not '{pair}'")
        env[name] = value
    return env
