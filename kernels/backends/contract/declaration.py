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
- the precisions it covers, with the library's own type for each (`precisions`).

A backend with nothing to declare needs no declaration (`BackendDeclaration(name, NoOptions)`
stands in)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from ...precision import Precision
from ...results import KernelResult, Settings


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

    def __init__(self, name: str, options: type[Options], title: str = "") -> None:
        self.name = name  # the key of its options in Settings.backend_options
        self.options = options
        self.title = title or f"{name} backend"

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
