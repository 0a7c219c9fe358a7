"""Shell commands and comments printed to be copied or saved as a script, fitted to the terminal's width.

A command is broken only between its words, with a backslash-newline, which the shell removes: what it
runs is the one line the words make. A command handed to another as one word (`deepbench-run --launch
"srun ..."`) is double-quoted, so that it may break too: inside double quotes a backslash-newline is
removed as well, and the indent after it is a space between the inner command's words (deepbench-run
splits them as a shell would). Comments wrap at their spaces, each line starting with "#"."""

from __future__ import annotations

import re
import shlex
import textwrap

from rich.cells import cell_len

INDENT = 4  # a command's continuation lines, under its first word
COMMENT = "#"
HANGING = 2  # a comment's continuation lines, under its first word
CONTINUED = " \\"
# What a double-quoted shell word still expands: escaped, so that the inner command arrives as printed.
EXPANDED_IN_DOUBLE_QUOTES = re.compile(r'([\\$`"])')


def quoted(words: list[str]) -> list[str]:
    """Each word quoted for the shell where it needs it (a path with spaces)."""
    return [shlex.quote(w) for w in words]


def option_units(argv: list[str]) -> list[str]:
    """A command's words quoted, each option with the value after it as one unit ("--suite smoke"), so
    that a break never parts them."""
    out: list[str] = []
    for word in quoted(argv):
        if out and out[-1].startswith("-") and " " not in out[-1] and not word.startswith("-"):
            out[-1] += " " + word
        else:
            out.append(word)
    return out


def one_word(words: list[str]) -> list[str]:
    """An inner command's words (each already quoted for the shell) as the pieces of one double-quoted
    word: the first piece opens the quotes, the last closes them, and a break may come between any two."""
    pieces = [EXPANDED_IN_DOUBLE_QUOTES.sub(r"\\\1", w) for w in words]
    pieces[0] = '"' + pieces[0]
    pieces[-1] += '"'
    return pieces


def command(words: list[str], width: int, prefix: str = "") -> str:
    """`words` (each already quoted; a unit may hold an option and its value, "-x PATH", which stay on one
    line) as one command, broken before a unit that would pass `width`; the lines after the first are
    indented by INDENT; `prefix` ("# ": a commented-out command) starts each."""
    lines: list[str] = []
    line = prefix + words[0]
    for i, word in enumerate(words[1:], 2):
        room = width - (0 if i == len(words) else cell_len(CONTINUED))
        if cell_len(line) + 1 + cell_len(word) <= room or line.strip() == prefix.strip():
            line += " " + word
        else:
            lines.append(line + CONTINUED)
            line = prefix + " " * INDENT + word
    return "\n".join([*lines, line])


def comment(text: str, width: int, indent: int = 1) -> str:
    """A comment `indent` spaces after its "#", wrapped at its spaces (never inside a word: a path stays
    whole), each line a comment, the lines after the first HANGING spaces further in."""
    return "\n".join(
        textwrap.wrap(
            text,
            width=width,
            initial_indent=COMMENT + " " * indent,
            subsequent_indent=COMMENT + " " * (indent + HANGING),
            break_long_words=False,
            break_on_hyphens=False,
        )
    )
