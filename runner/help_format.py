"""`--help` fitted to the terminal: argparse wraps the options' help but prints a description as written
(RawDescriptionHelpFormatter), or rewraps all of it, examples included (HelpFormatter). A command's
description is its module's docstring: prose paragraphs and indented examples. Here the prose is wrapped to
the width argparse chose (COLUMNS, else the terminal's) and the examples keep their lines where they fit;
one that does not puts its comment on the lines above it, and a command still too wide is broken between
its words with backslash-newlines (runner/render/shell_lines.py), so that it can still be pasted."""

from __future__ import annotations

import argparse
import shlex
import textwrap
from dataclasses import dataclass, field

from .render.shell_lines import command, option_units

COMMENT = " # "  # an example's comment beside its command (a space before it at least)
CONTINUED = "\\"
PROGRAMS = ("deepbench", "deepbench-run")


@dataclass
class Example:
    """One indented example: its lines as written, the command (continuations joined) and its comment
    (the comment lines aligned under it joined)."""

    lines: list[str]
    indent: str
    command: str
    comment: list[str] = field(default_factory=list)

    def fits(self, width: int) -> bool:
        return all(len(line) <= width for line in self.lines)

    def rewritten(self, width: int) -> list[str]:
        """The comment on the lines above the command, the command fitted to `width`."""
        room = width - len(self.indent)
        out = textwrap.wrap(" ".join(self.comment), room, initial_indent="# ", subsequent_indent="# ")
        out += _command_lines(self.command, room)
        return [self.indent + line for line in out]


def _command_lines(text: str, width: int) -> list[str]:
    """A deepbench command broken between its words (continued with a backslash), anything else (a formula)
    wrapped at its spaces."""
    if len(text) <= width:
        return [text]
    try:
        words = shlex.split(text)
    except ValueError:
        words = []
    if words and words[0] in PROGRAMS:
        return command(option_units(words), width).splitlines()
    return textwrap.wrap(text, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)


def _examples(lines: list[str]) -> list[Example]:
    """Indented lines as examples: a line ending in a backslash continues on the next, and a comment line
    indented further than the block (aligned under the comment above it) continues that comment."""
    base = min(len(line) - len(line.lstrip()) for line in lines)
    out: list[Example] = []
    for line in lines:
        stripped = line.strip()
        if out and out[-1].command.endswith(CONTINUED):
            out[-1].lines.append(line)
            out[-1].command = out[-1].command[: -len(CONTINUED)].rstrip() + " " + stripped
        elif out and stripped.startswith("#") and len(line) - len(line.lstrip()) > base:
            out[-1].lines.append(line)
            out[-1].comment.append(stripped.lstrip("# "))
        else:
            cmd, _, note = line.partition(COMMENT)
            out.append(
                Example([line], line[: len(line) - len(line.lstrip())], cmd.strip(), [note.strip()] if note else [])
            )
    return out


def fill_description(text: str, width: int, indent: str = "") -> str:
    """Each run of unindented lines wrapped as one paragraph, each run of indented ones fitted as examples;
    blank lines kept."""
    out: list[str] = []
    run: list[str] = []
    prose = True

    def flush() -> None:
        if run and prose:
            out.extend(textwrap.wrap(" ".join(run), width, initial_indent=indent, subsequent_indent=indent))
        elif run:  # examples as written where all fit, else each with its comment above it (one style a block)
            examples, room = _examples(run), width - len(indent)
            fit = all(e.fits(room) for e in examples)
            out.extend(indent + x for e in examples for x in (e.lines if fit else e.rewritten(room)))
        run.clear()

    for line in textwrap.dedent(text).strip("\n").splitlines():
        if not line.strip():
            flush()
            out.append("")
            continue
        if line[0].isspace() == prose:  # prose turns to examples, or back
            flush()
            prose = not line[0].isspace()
        run.append(line.strip() if prose else line)
    flush()
    return "\n".join(out)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's layout (usage and options wrapped to the width), with descriptions filled as above."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return fill_description(text, width, indent)

    def _split_lines(self, text: str, width: int) -> list[str]:
        """An option's help wrapped at its spaces only: a path or an option name is never cut at a hyphen."""
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)
