"""What `deepbench-run` is asked to do, parsed once into a frozen `RunRequest`.

Each option group is built where its options live (the platform's in platforms.py, the selection's
in selection.py, the container's beside the container starter, the ranks' beside the ranks, the
measurement's beside the settings they make, the results' beside the run folder, each backend's from
its declaration); `add_arguments` lists them. The parsed command line becomes typed parts, each
checked as it is made, and then the request as a whole (a platform to run on, a known backend, a
selection that matches kernels, no options that contradict each other), so that every mistake is one
line and exit status 2 before a results folder exists or a harness starts. Below the entry point
(runner/cli.py) only the request travels, never argparse's Namespace; `deepbench launch-command`
plans from the same type."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from deepbench.kernels.results import Settings
from deepbench.kernels.suites import SelectionError

from ...backend_options import AskedOptions, add_backend_arguments, asked_options, options_from
from ...errors import UserError
from ...platforms import (
    LOCAL_DEFAULT,
    PLATFORMS,
    Platform,
    add_where_arguments,
    check_backend,
    check_local_host,
    get_platform,
)
from ...selection import KernelSelection, add_selection_arguments
from ..images.container_options import CONTAINER_ONLY, ContainerOptions, add_container_arguments, parse_env
from ..ranks.rank_plan import add_rank_arguments, plan_backend
from .measurement import Measurement, add_measurement_arguments
from .run_folder import NewRun, ResultsOptions, RunMode, add_results_arguments, mode_from

if TYPE_CHECKING:
    from deepbench.kernels.catalog import Kernel

LOCAL_PLATFORM = LOCAL_DEFAULT  # --local without --platform


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """deepbench-run's options, one group builder each."""
    add_where_arguments(parser)
    add_container_arguments(parser)
    add_selection_arguments(parser, with_precision=True)
    add_rank_arguments(parser)
    add_measurement_arguments(parser)
    add_backend_arguments(parser)
    add_results_arguments(parser)


@dataclass(frozen=True)
class RunRequest:
    """One `deepbench-run` (or `deepbench launch-command`) command line, typed and checked.

    `platform`: the one named, cpu with --local, None for a resume that names none (the plan's
    holds). `backend`: the one named (None: the platform's). `explicit`: the dests of the options the
    command line named, not left at their defaults (what --resume holds against the plan)."""

    selection: KernelSelection
    platform: Platform | None
    local: bool
    backend: str | None
    measurement: Measurement
    backend_options: tuple[AskedOptions, ...]
    ranks: int
    mode: RunMode
    results: ResultsOptions
    container: ContainerOptions
    env: Mapping[str, str]
    explicit: frozenset[str]

    def __post_init__(self) -> None:
        if self.backend is not None:
            check_backend(self.backend)
        if self.local and "local" in self.explicit:
            named = [d for d in CONTAINER_ONLY if d in self.explicit]
            if named:
                flags = ", ".join("--" + d.replace("_", "-") for d in named)
                verb = "applies" if len(named) == 1 else "apply"
                raise UserError(f"{flags} {verb} to container runs, and --local runs the harness without one")
        if isinstance(self.mode, NewRun):
            platform = self.run_platform
            if self.local:
                check_local_host(platform)  # --local --platform arm on an x86-64 host records what did not run
            self.measurement.check_platform(platform)
            self.plan_backend(platform)  # several ranks: collectives only, on a collective backend

    @classmethod
    def from_args(cls, args: argparse.Namespace, explicit: frozenset[str] = frozenset()) -> RunRequest:
        """The request a parsed command line makes (every part checked as it is read)."""
        _refuse_empty(args)
        named = get_platform(args.platform) if args.platform else None
        return cls(
            selection=KernelSelection.from_args(args),
            platform=named or (get_platform(LOCAL_PLATFORM) if args.local else None),
            local=bool(args.local),
            backend=args.backend,
            measurement=Measurement.from_args(args),
            backend_options=asked_options(args, explicit),
            ranks=args.ranks,
            mode=mode_from(args),
            results=ResultsOptions.from_args(args),
            container=ContainerOptions.from_args(args),
            env=MappingProxyType(parse_env(args.env)),
            explicit=frozenset(explicit),
        )

    @property
    def run_platform(self) -> Platform:
        """The platform a new run runs on; neither --local nor --platform: the user is told to say."""
        if self.platform is None:
            raise UserError(
                "say where to run: --local (this machine, no container) or --platform P "
                f"(one of: {', '.join(PLATFORMS)})"
            )
        return self.platform

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The selected kernels (built once); a selection that matches none is a UserError."""
        try:
            kernels = self.selection.kernels
        except SelectionError as exc:
            raise UserError(str(exc)) from None
        if not kernels:
            raise UserError("the selection matches no kernel (see: deepbench list --suite ... --where ...)")
        return kernels

    def plan_backend(self, platform: Platform) -> str:
        """The backend the plan names: the one asked for or the platform's, or on several ranks the
        collective backend it uses (runner/launch/ranks/rank_plan.py)."""
        return plan_backend(self.backend or platform.backend, self.ranks, platform, self.kernels)

    def settings(self, platform: Platform | None = None, backend: str | None = None) -> Settings:
        """The settings asked for, on `platform` (the request's by default); `backend`: the plan's,
        whose backends' options are all recorded (runner/backend_options.py)."""
        return self.measurement.settings(
            platform or self.run_platform, options_from(self.backend_options, backend), self.ranks
        )


def _refuse_empty(args: argparse.Namespace) -> None:
    """An option given with nothing in it (--ops ''): said, not read as its default."""
    for flag, value in (
        ("--ops", args.ops),
        ("--precision", args.precision),
        ("--suite", args.suite),
        *(("--where", w) for w in args.where or ()),
    ):
        if value is not None and not value.strip(" ,"):
            raise UserError(
                f"{flag} is empty: name at least one, or leave the option out for its default "
                f"(see deepbench-run --help)"
            )


def explicit_options(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> frozenset[str]:
    """The options the command line names (not those left at their defaults): parsed once more
    with every default suppressed. --resume refuses those that would change the run."""
    saved = [(action, action.default) for action in parser._actions]
    saved_defaults = dict(parser._defaults)
    try:
        for action, _ in saved:
            action.default = argparse.SUPPRESS
        parser._defaults.clear()
        return frozenset(vars(parser.parse_args(argv)))
    finally:
        for action, default in saved:
            action.default = default
        parser._defaults.update(saved_defaults)


def parse_request(argv: Sequence[str] | None, parser: argparse.ArgumentParser | None = None) -> RunRequest:
    """The request of a deepbench-run command line (`parser`: one `add_arguments` filled; by
    default a plain one). argparse's own errors exit with status 2; the request's are UserErrors."""
    if parser is None:
        parser = argparse.ArgumentParser(prog="deepbench-run")
        add_arguments(parser)
    return RunRequest.from_args(parser.parse_args(argv), explicit_options(parser, argv))
