"""Entry points: `deepbench-run` (the main job) and `deepbench` (everything else).

User mistakes print one line ('error: ...', naming the valid choices or the next step) and exit
with status 2; they never show a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape

from ..kernels import __version__
from ..kernels.format_versions import FormatVersionError
from ..kernels.harness.protocol import ExitCode
from ..kernels.results_file import WriteFailed
from .argv_text import require_text_arguments
from .errors import UserError
from .help_format import HelpFormatter
from .launch.running.signals import exit_status


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit status 2, and help fitted to the terminal
    (runner/help_format.py), the nested commands' (images build ...) too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(ExitCode.USAGE)


def _text_only(argv: Sequence[str] | None, fn: Callable[[], int]) -> Callable[[], int]:
    """`fn`, once every argument is known to be text: those parsed (`argv`) and the process's own, which
    the plan and the run record keep (runner/argv_text.py)."""

    def checked() -> int:
        require_text_arguments(sys.argv)
        if argv is not None:
            require_text_arguments(["", *argv])
        return fn()

    return checked


def _guard(fn: Callable[[], int], prog: str) -> int:
    try:
        return fn()
    except UserError as exc:
        _error(prog, str(exc))
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM/SIGHUP, runner/launch/running/signals.py) outside a run
        return exit_status(exc)
    except FormatVersionError as exc:  # a file of a newer (or no) format version, wherever a command read it
        _error(prog, str(exc))
        return ExitCode.USAGE
    except WriteFailed as exc:  # a document that could not be written whole (a full disk ...): it was not
        _error(prog, f"{exc}; the file was left as it was")
        return ExitCode.WRITE_FAILED
    except OSError as exc:  # a file that cannot be read or written: one line, whatever the command
        where = f"{exc.filename}: " if exc.filename else ""
        _error(prog, f"{where}{exc.strerror or exc}")
        return ExitCode.USAGE


def _error(prog: str, message: str) -> None:
    # a library's message may hold [brackets] (gloo's source paths): never read as markup
    Console(stderr=True).print(f"[bold red]{prog}: error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def run_main(argv: Sequence[str] | None = None) -> int:
    """deepbench-run: the command line parsed once into a RunRequest (every mistake one line, before
    anything is written or started), which is all the run is handed."""
    from .launch.running import request, run

    parser = Parser(prog="deepbench-run", description=run.DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"deepbench {__version__}")
    request.add_arguments(parser)
    return _guard(_text_only(argv, lambda: run.run(request.parse_request(argv, parser))), "deepbench-run")


def main(argv: Sequence[str] | None = None) -> int:
    from .commands import (
        COMMANDS,  # here, not at the top: deepbench-run starts without them (its device check is timed)
    )

    parser = Parser(
        prog="deepbench",
        description="DeepBench's kernels on each vendor's libraries: everything "
        "besides running (that is deepbench-run).",
    )
    parser.add_argument("--version", action="version", version=f"deepbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.__doc__,
        )
        module.add_arguments(p)
        p.set_defaults(handler=module.run)
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return ExitCode.USAGE
    return _guard(_text_only(argv, lambda: args.handler(args)), f"deepbench {args.command}")


def _entry(fn: Callable[[], int]) -> None:
    sys.exit(fn())


if __name__ == "__main__":
    _entry(main)
