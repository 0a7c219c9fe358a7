"""Backends' own options, read through their declarations (kernels/backends/contract/declaration.py), so that
no module of the runner names a library: the option groups of `deepbench-run`, the options each
declaration parses from the command line once (`AskedOptions`, part of the run request), what a plan
stores (Settings.backend_options), the arguments that ask for it again (the reproduce command), what
`verify` re-runs with, and the options given with --resume that would change a run."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..kernels.backends import declaration_named, declarations, result_backends
from ..kernels.backends.contract.declaration import BackendDeclaration, BackendOptions, BackendOptionsError
from ..kernels.results import KernelResult, Settings
from .errors import UserError


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Each registered backend's options, in a group of its own (its declaration's title)."""
    for declared in declarations():
        declared.add_arguments(parser.add_argument_group(declared.title))


@dataclass(frozen=True)
class AskedOptions:
    """One backend's options as the command line asks for them (its declaration parsed them), and
    which of its options the command line named (what --resume must find unchanged)."""

    declared: BackendDeclaration[Any]
    options: BackendOptions
    named: frozenset[str]  # the dests of its options that the command line named
    flags: tuple[str, ...]  # their flags, for messages

    @property
    def key(self) -> str:
        return self.declared.name


def asked_options(args: argparse.Namespace, explicit: frozenset[str]) -> tuple[AskedOptions, ...]:
    """Every registered backend's options from the parsed command line, each parsed and checked by its
    declaration (a value its model refuses is a UserError naming the backend and the field)."""
    asked = []
    for declared in declarations():
        try:
            options = declared.options_from(args)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise UserError(f"{declared.title} options: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        probe = argparse.ArgumentParser(add_help=False)  # the flags and dests this backend adds
        declared.add_arguments(probe.add_argument_group())
        named = frozenset(a.dest for a in probe._actions) & explicit
        flags = tuple(sorted(f for a in probe._actions if a.dest in named for f in a.option_strings))
        asked.append(AskedOptions(declared, options, named, flags))
    return tuple(asked)


def options_from(asked: Iterable[AskedOptions], backend: str | None) -> dict[str, dict[str, Any]]:
    """Settings.backend_options for the command line: every option of the backends the plan's
    backend runs kernels on (a later version may change a default), and any other backend's that
    the command line sets."""
    involved = {d.name for d in declarations(result_backends(backend))} if backend else set()
    stored: dict[str, dict[str, Any]] = {}
    for one in asked:
        declared = one.declared
        if not declared.options.model_fields:  # a backend with no options (one that only delegates)
            continue
        if declared.name in involved or one.options != declared.flag_defaults():
            stored[declared.name] = declared.stored(one.options)
    return stored


def _declared(key: str) -> BackendDeclaration[Any]:
    declared = declaration_named(key)
    if declared is None:
        raise UserError(f"the plan holds options of a backend not installed here ('{key}'): cannot repeat them")
    return declared


def _options(declared: BackendDeclaration[Any], settings: Settings) -> Any:
    try:
        return declared.options_of(settings)
    except BackendOptionsError as exc:
        raise UserError(f"the plan's settings: {exc}") from None


def backend_args(settings: Settings) -> list[str]:
    """The deepbench-run arguments that ask for these settings' backend options again."""
    args: list[str] = []
    for key in sorted(settings.backend_options):
        declared = _declared(key)
        args += declared.to_args(_options(declared, settings))
    return args


def replayed(settings: Settings, results: Iterable[KernelResult]) -> Settings:
    """The settings `verify` re-runs a submission with: each backend pins what its results
    recorded of the choices it made (its declaration's `replay`)."""
    results = list(results)
    stored = dict(settings.backend_options)
    for declared in declarations():
        options = _options(declared, settings)
        again = declared.replay(options, results)
        if again != options or declared.name in stored:
            stored[declared.name] = declared.stored(again)
    return settings.model_copy(update={"backend_options": stored})


def option_conflicts(asked: Iterable[AskedOptions], settings: Settings) -> list[str]:
    """The backend options given with --resume that differ from the run's (nothing may change)."""
    out = []
    for one in asked:
        if not one.named:
            continue
        planned = _options(one.declared, settings)
        if one.options != planned:
            given, was = one.declared.stored(one.options), one.declared.stored(planned)
            out.append(f"{', '.join(one.flags)}: {given} differs from the run's {was}")
    return out


def shown(settings: Settings, device: str) -> dict[str, dict[str, Any]]:
    """The backend options a report shows: on a CPU, none that mean something only on a GPU
    (their description says GPU), as with the other settings."""
    out: dict[str, dict[str, Any]] = {}
    for key, values in settings.backend_options.items():
        declared = declaration_named(key)
        fields = declared.options.model_fields if declared else {}
        out[key] = {
            k: v
            for k, v in values.items()
            if device != "cpu" or k not in fields or "GPU" not in (fields[k].description or "")
        }
    return out
