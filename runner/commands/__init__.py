"""`deepbench` subcommands, one module each: NAME, HELP, add_arguments(parser), run(args) -> int.

To add a command, write its module and list it here."""

from . import list_kernels

COMMANDS = [list_kernels]
