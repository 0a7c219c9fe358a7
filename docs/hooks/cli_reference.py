"""mkdocs hook: the CLI reference page (`cli.md`), written at build time from the real parsers.

Why a hook and not a hand-written page: the reference must never drift from the code. The parsers
are not rebuilt here; `deepbench.runner.cli.run_main` and `main` build them as they do for a user,
and a stand-in for `cli.Parser` hands each finished parser back instead of parsing. Every
subcommand (and every nested action, such as `images build`) is then rendered from its parser's
actions: its usage (wrapped at USAGE_WIDTH, so the code block fits the page), its description,
and one table per argument group (option, value, default, help), which the page's width wraps
instead of a 100-column `--help` block running off it.

Registered in mkdocs.yml under `hooks:`; the page is a generated file, nothing is written into
docs/. Needs deepbench installed (`pip install -e '.[docs]'`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

PAGE = "cli.md"
# Width of the usage lines, in columns (argparse reads COLUMNS), and of the example commands'
# lines: a code block that fits the page.
USAGE_WIDTH = 80
CODE_WIDTH = 80

INTRO = """# CLI reference

Generated when the documentation is built, from the parsers `deepbench.runner.cli` builds: every
option of every command, as `--help` names it, one table per group. Two programs: `deepbench-run` runs a suite;
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


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(action: argparse.Action) -> str:
    """What an option takes: its choices, its metavar, or nothing for a flag."""
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "{" + ",".join(map(str, action.choices)) + "}"
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    return metavar if isinstance(metavar, str) else " ".join(metavar)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], False) or action.required:
        return ""
    return f"`{action.default}`"


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:  # argparse's own substitutions (%(default)s ...)
        text = text % {**vars(action), "prog": "", "default": action.default}
    return text


def option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, list[list[str]]]]:
    """(group title, rows of option, value, default, help) for each group that has an argument."""
    out = []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
            rows.append([name, _cell(_value(action)), _default(action), _cell(_help(action))])
        if rows:
            out.append((group.title or "arguments", rows))
    return out


def _sections(parser: argparse.ArgumentParser, level: int) -> Iterator[str]:
    parts = [f"{'#' * level} `{parser.prog}`\n", f"```text\n{parser.format_usage().rstrip()}\n```\n"]
    if parser.description:
        parts.extend(description_blocks(parser.description))
    subs = _subparsers(parser)
    if subs:
        parts.append(
            "| command | what it does |\n| --- | --- |\n"
            + "\n".join(f"| `{name}` | {_cell(_sub_help(parser, name))} |" for name, _ in subs)
            + "\n"
        )
    for title, rows in option_rows(parser):
        parts.append(
            f"**{title}**\n\n| option | value | default | what it does |\n| --- | --- | --- | --- |\n"
            + "\n".join("| " + " | ".join(r) + " |" for r in rows)
            + "\n"
        )
    yield "\n".join(parts)
    for _, child in subs:
        yield from _sections(child, level + 1)


def description_blocks(text: str) -> list[str]:
    """A parser's description as Markdown: its indented blocks (example commands) as code, the rest
    as paragraphs the page wraps to its width."""
    import html
    import textwrap

    out = []
    for block in textwrap.dedent(text).strip().split("\n\n"):
        lines = block.splitlines()
        if all(line.startswith((" ", "\t")) for line in lines if line.strip()):
            code = [fitted for line in textwrap.dedent(block).strip().splitlines() for fitted in fit_line(line)]
            out.append("```text\n" + "\n".join(code) + "\n```\n")
        else:
            words = html.escape(" ".join(" ".join(lines).split()), quote=False)
            out.append(words.replace("*", "\\*").replace("_", "\\_") + "\n")
    return out


def fit_line(line: str) -> list[str]:
    """An example line within CODE_WIDTH: its comment above the command, then a long command broken
    before its options with shell continuations (what a user may paste as it is)."""
    if len(line) <= CODE_WIDTH:
        return [line]
    if line.lstrip().startswith("#"):  # a comment continued under the one above: it keeps its words
        return [line.lstrip()]
    indent = line[: len(line) - len(line.lstrip())]
    command, sep, comment = line.partition("  # ")
    out = [f"{indent}# {comment.strip()}"] if sep else []
    command = command.rstrip()
    pieces = command.split(" --")
    current = pieces[0]
    for piece in pieces[1:]:
        if len(current) + len(piece) + 3 > CODE_WIDTH:
            out.append(current + " \\")
            current = indent + "    --" + piece
        else:
            current += " --" + piece
    return [*out, current]


def _sub_help(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


def render() -> str:
    """The whole page: deepbench-run, then deepbench and each of its commands, nested actions below them."""
    from deepbench.runner import cli

    with _help_width(USAGE_WIDTH):
        parts = [INTRO]
        for entry in (cli.run_main, cli.main):
            parts.extend(_sections(built_parser(entry), level=2))
    return "\n".join(parts)


def on_files(files: Any, config: Any) -> Any:
    """mkdocs event: add the generated page before the navigation is built (so `nav:` can name it)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files
