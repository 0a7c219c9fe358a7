"""What a backend declares of itself, importable without its library.

The host (`deepbench-run --help`, the plan, the reproduce command, `verify`, the reports and the
checker) must never import a backend's library, yet it needs the backend's own options and the
facts it records. So a backend that has any says them here, in a light module of its own folder
(`<folder>/declaration.py`), named beside the backend in the registry (backends/__init__.py):

- its options: a pydantic model, stored in the plan under `Settings.backend_options[name]`
  (absent: the model's defaults), with the CLI option group that sets them (`add_arguments`, as
  SuperBench's benchmarks own theirs with `add_parser_arguments`), how they are written back as
  command-line arguments (`to_args`: the reproduce command) and what `verify` pins of what a
  submission recorded (`replay`);
- the typed `info` it adds to each part (`part_info`), which readers go through (`info_of`);
- where it hands operations to other backends, which backend serves which operation (`serves`);
- the precisions it covers, with the library's own type for each (`precisions`);
- what the host decides by, so that no host module names a backend or a library: the platforms it
  serves and how much it prefers each (`platforms`: a platform's default backend), the libraries it
  calls (`libraries`: help text), the directions it times (`forward_only`, `forward_only_precisions`,
  `optional_backward`), whether an RNN's FLOPs count the input projection (`counts_input_projection`),
  how its ranks are launched (`launcher`, or the collective backend several ranks of it use on each
  device: `ranked_collectives`), what its ranks must be passed across nodes (`rank_environment`), the
  original tools its results are set beside (`anchors`), the backend whose dense GEMM is timed
  beside its sparse one (`dense_backend`), what to install where its library is missing
  (`install_hint`), and the find-db it keeps its search's findings in between runs (`find_db`:
  contract/find_db.py; `deepbench cache` lists, exports and imports them);
- which `unsupported` results it may give (`may_refuse`: `deepbench check` asks it of every one): by
  default where its code raises that reason on a path the kernel and precision can take.

Every backend has one, in its folder's declaration.py."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from ...kernel import Kernel
from ...precision import Precision
from ...results import KernelResult, Settings
from .find_db import FindDbSpec


class BackendOptions(BaseModel):
    """A backend's own settings: frozen, and nothing it does not know (a misspelt key is an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def add_choice(
    group: argparse._ArgumentGroup,
    flag: str,
    model: type[BackendOptions],
    field: str,
    text: str,
    default: str | None = None,
) -> None:
    """A flag that sets one Literal field of a backend's options: its choices are the field's own, so the
    command line and the model that checks a plan cannot drift apart; its default is the field's, or
    `default` where a new run asks for another value than the field's (what runs recorded before the
    flag existed did)."""
    info = model.model_fields[field]
    group.add_argument(flag, choices=get_args(info.annotation), default=default or info.default, help=text)


class NoOptions(BackendOptions):
    """The options of a backend that has none."""


class PartInfo(BaseModel):
    """The facts a backend adds to a part's `info` (extra keys: those of the harness, kept as is)."""

    model_config = ConfigDict(frozen=True, extra="allow")


Info = TypeVar("Info", bound=PartInfo)
Options = TypeVar("Options", bound=BackendOptions)


def info_of(model: type[Info], info: Mapping[str, Any]) -> Info | None:
    """The `info` a result recorded, read through its backend's model; None where it is not that
    backend's (another backend made the part, or a field has another shape)."""
    try:
        return model.model_validate(info)
    except ValidationError:
        return None


class BackendOptionsError(ValueError):
    """A plan's options for a backend that its declaration does not accept (the message says which)."""


@dataclass(frozen=True)
class Launcher:
    """An engine that starts a collective backend's ranks (runner/launch/ranks/engines.py drives it): its
    name, the Python module it runs as (`python -m MODULE`; '' where it is a program of its own, found
    beside the harness's Python or on PATH), the variables its ranks meet through across nodes, what
    its ranks need set inside a container (name, value), and whether it starts even a run of one rank
    (an MPI library's ranks are always the engine's processes)."""

    name: str
    module: str = ""
    rendezvous_env: tuple[str, ...] = ()
    container_env: tuple[tuple[str, str], ...] = ()
    always: bool = False


class RaiseSites(Protocol):
    """The `raise Unsupported(...)` sites of a backend's code, as unsupported_reasons.py reads them."""

    def give(self, reason: str, kernel: Kernel, precision: Precision) -> bool:
        """Whether a site gives `reason` on a path this kernel and precision can take."""
        ...


class BackendDeclaration(Generic[Options]):
    """A backend's self-description; subclass it for a backend with options, info or delegates."""

    options: type[Options]
    part_info: ClassVar[type[PartInfo] | None] = None
    # A backend that picks a library per operation: operation -> the backend that serves it, and
    # the backend that serves every other operation ('' where it delegates nothing).
    serves: ClassVar[Mapping[str, str]] = {}
    fallback: ClassVar[str] = ""
    # The precisions it covers -> the library's own types for each.
    precisions: ClassVar[Mapping[Precision, object]] = {}
    # The native libraries it calls, as their makers write them (help text; no host module names them).
    libraries: ClassVar[tuple[str, ...]] = ()
    # platform name -> preference: a platform runs the backend that prefers it most unless --backend says.
    platforms: ClassVar[Mapping[str, int]] = {}
    # Every kernel times its forward pass alone (an inference engine), or these operations' precisions do.
    forward_only: ClassVar[bool] = False
    forward_only_precisions: ClassVar[Mapping[str, frozenset[str]]] = {}
    # The engine that starts its ranks (a collective backend's); None: it runs as one process, and
    # several ranks of a run on it use the collective backend named here for the run's device.
    launcher: ClassVar[Launcher | None] = None
    max_ranks: ClassVar[int] = 1  # the most ranks its results can be checked on
    ranked_collectives: ClassVar[Mapping[str, str]] = {}
    # Variables its ranks must be passed across nodes, with the value a launch command gives them when
    # the site sets none.
    rank_environment: ClassVar[Mapping[str, str]] = {}
    # The original tools its results are set beside (`deepbench report --nccl-tests`).
    anchors: ClassVar[tuple[str, ...]] = ()
    # The backend whose dense GEMM of the same shape is timed beside its sparse one ('' : none).
    dense_backend: ClassVar[str] = ""
    # What to install where its library is missing ('' : nothing beyond the package's extra).
    install_hint: ClassVar[str] = ""
    # Where it measures the device's ceilings for the roofline ('' : it measures none).
    ceilings_on: ClassVar[str] = ""
    # The find-db its search's findings are kept in between runs (None: it keeps none).
    find_db: ClassVar[FindDbSpec | None] = None

    def __init__(self, name: str, options: type[Options], title: str = "") -> None:
        self.name = name  # the key of its options in Settings.backend_options
        self.options = options
        self.title = title or f"{name} backend"

    def counts_input_projection(self, device: str) -> bool:
        """Whether its RNN results on `device` count the input projection's FLOPs (a library that
        cannot leave W x_t out of the recurrence; DeepBench left it out)."""
        return False

    def optional_backward(self, kernel: Kernel, device: str) -> bool:
        """Whether a result of `kernel` on `device` may hold its forward pass alone (the backward
        passes optional), beyond `forward_only` and an inference set's forward-only kernels."""
        return False

    def may_refuse(self, kernel: Kernel, precision: Precision, reason: str, device: str, sites: RaiseSites) -> bool:
        """Whether a result of `kernel` in `precision` on `device` may be `unsupported` for `reason`:
        `deepbench check` accepts one only then. By default, where a site of this backend's code (its
        package and the shared layers it imports: `sites`) raises Unsupported with that text on a path
        the kernel and precision can take (the kernel class its function takes, the conditions above
        it: reason_guards.py). A backend that knows more of where a reason applies (a device it needs)
        answers with that too."""
        return sites.give(reason, kernel, precision)

    def collective_backend(self, device: str) -> str:
        """The collective backend several ranks of a run of this backend use on `device` ('': none)."""
        return next((b for prefix, b in self.ranked_collectives.items() if device.startswith(prefix)), "")

    @property
    def delegates(self) -> tuple[str, ...]:
        """The backends whose results a run of this one may hold (the checker's list)."""
        return tuple(dict.fromkeys((*self.serves.values(), *((self.fallback,) if self.fallback else ()))))

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        """Add this backend's options to `deepbench-run`'s parser (its own group)."""

    def options_from(self, args: argparse.Namespace) -> Options:
        """The options `deepbench-run`'s parsed arguments ask for."""
        return self.options()

    def to_args(self, options: Options) -> list[str]:
        """The arguments that ask for `options` again (those that differ from the defaults)."""
        return []

    def flag_defaults(self) -> Options:
        """The options a command line that names none of this backend's flags asks for (a flag's
        default may differ from the field's, which is what runs recorded before the option did)."""
        parser = argparse.ArgumentParser(add_help=False)
        self.add_arguments(parser.add_argument_group())
        return self.options_from(parser.parse_args([]))

    def replay(self, options: Options, results: Iterable[KernelResult]) -> Options:
        """The options `verify` re-runs a submission with: by default as given; a backend that
        records a choice it made (cuDNN's engine) pins it, so that verify re-runs the same call."""
        return options

    def options_of(self, settings: Settings) -> Options:
        """This backend's options in a plan's settings (defaults where it has none)."""
        try:
            return self.options.model_validate(settings.backend_options.get(self.name, {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in (self.name, *first["loc"]))
            raise BackendOptionsError(f"backend_options.{where}: {first['msg']}") from None

    def stored(self, options: Options) -> dict[str, Any]:
        """The options as the plan stores them (every field: a later version may change a default)."""
        return options.model_dump(mode="json")
