"""Arguments are text: every command-line argument, and every text a user types in through a file
(submit's --vendor-file), must be UTF-8, checked before anything is made.

deepbench writes what it is given into JSON and Markdown: a path into run.json and the plan's
`command`, a note into the bundle's README. Linux hands a program its arguments as bytes, and Python
keeps bytes that are not UTF-8 as lone surrogates (PEP 383), which no UTF-8 writer accepts: `--out
$'runs/\\xff\\xfebad'` once failed deep inside the first write (PydanticSerializationError), after its folder
and lock were made, and `submit --notes $'\\xff\\xfe'` with UnicodeEncodeError, leaving its partial bundle
behind. Refused at the door, either is one line and exit status 2, and nothing is written."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import UserError

ENCODING = "utf-8"


def shown(text: str) -> str:
    """`text` as a line can show it: bytes that are not UTF-8 as \\xNN, as the shell's $'...' writes them."""
    try:
        raw = text.encode(ENCODING, "surrogateescape")  # the bytes the program was given
    except UnicodeEncodeError:  # a surrogate no byte made (a JSON escape such as \udcff)
        return text.encode(ENCODING, "backslashreplace").decode(ENCODING)
    return raw.decode(ENCODING, "backslashreplace")


def is_text(value: str) -> bool:
    """Whether `value` can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        value.encode(ENCODING)
    except UnicodeEncodeError:
        return False
    return True


def require_text(value: str, what: str) -> str:
    """`value`, or a UserError naming `what` when it is not UTF-8 text."""
    if not is_text(value):
        raise UserError(
            f"{what} ({shown(value)}) is not UTF-8 text: deepbench writes it into JSON, which holds UTF-8 only; "
            "rename the file or folder, or type the text again (nothing was written)"
        )
    return value


def require_text_arguments(argv: Iterable[str]) -> None:
    """Every argument of the command line as UTF-8 text (the program's name included: the plan and the
    run record keep the command)."""
    for n, arg in enumerate(argv):
        require_text(arg, "the program's name" if n == 0 else f"argument {n}")
