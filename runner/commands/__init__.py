"""`deepbench` subcommands, one module each: NAME, HELP, add_arguments(parser), run(args) -> int.

To add a command, write its module and list it here."""

from . import (
    cache,
    check,
    compare,
    fastest,
    images,
    launch_command,
    list_kernels,
    models,
    references,
    report,
    submit,
    verify,
)

COMMANDS = [
    list_kernels,
    images,
    submit,
    check,
    verify,
    report,
    compare,
    fastest,
    references,
    models,
    launch_command,
    cache,
]
