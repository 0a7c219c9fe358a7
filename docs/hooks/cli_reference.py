"""mkdocs hook: the CLI reference page (`cli.md`), written at build time from the real parsers.

Why a hook and not a hand-written page: the reference must never drift from the code. The parsers
are not rebuilt here; `deepbench.runner.cli.run_main` and `main` build them as they do for a user,
and a stand-in for `cli.Parser` hands each finished parser back instead of parsing. Every
subcommand (and every nested action, such as `images build`) is then rendered with its own
`--help` text, at a fixed width so the page does not depend on the terminal that built it.

Registered in mkdocs.yml under `hooks:`; the page is a generated file, nothing is written into
docs/. Needs deepbench installed (`pip install -e '.[docs]'`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

PAGE = "cli.md"
# Width of the rendered help, in columns (argparse reads COLUMNS): wide enough for the option
# tables, narrow enough for a code block on a laptop screen.
HELP_WIDTH = 100

INTRO = """# CLI reference

Generated when the documentation is built, from the parsers `deepbench.runner.cli` builds: what
follows is exactly what `--help` prints. Two programs: `deepbench-run` runs a suite;
`deepbench COMMAND` does everything else (lists, images, reports, comparisons, submissions, models,
multi-node commands).
"""


class _Built(Exception):
    """Raised by the stand-in parser in place of parsing: carries the parser the CLI built."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _stand_in(base: type[argparse.ArgumentParser]) -> type[argparse.ArgumentParser]:
    class Capturing(base):  # type: ignore[misc, valid-type]
        def parse_args(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[override]
            raise _Built(self)

    return Capturing


@contextmanager
def _help_width(columns: int) -> Iterator[None]:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def built_parser(entry: Callable[[Sequence[str] | None], int]) -> argparse.ArgumentParser:
    """The top-level parser that `entry` (cli.run_main or cli.main) builds, captured before it parses."""
    from deepbench.runner import cli

    real = cli.Parser
    cli.Parser = _stand_in(real)  # type: ignore[misc]
    try:
        entry([])
    except _Built as built:
        return built.parser
    finally:
        cli.Parser = real  # type: ignore[misc]
    raise RuntimeError(f"{entry.__name__} returned without parsing its arguments")


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of each subcommand, in the order --help lists them."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def _sections(parser: argparse.ArgumentParser, level: int) -> Iterator[str]:
    yield f"{'#' * level} `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n"
    for _, child in _subparsers(parser):
        yield from _sections(child, level + 1)


def render() -> str:
    """The whole page: deepbench-run, then deepbench and each of its commands, nested actions below them."""
    from deepbench.runner import cli

    with _help_width(HELP_WIDTH):
        parts = [INTRO]
        for entry in (cli.run_main, cli.main):
            parts.extend(_sections(built_parser(entry), level=2))
    return "\n".join(parts)


def on_files(files: Any, config: Any) -> Any:
    """mkdocs event: add the generated page before the navigation is built (so `nav:` can name it)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files
