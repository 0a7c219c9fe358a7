"""`deepbench` subcommands, one module each: NAME, HELP, add_arguments(parser), run(args) -> int.

To add a command, write its module and list it here."""

from . import check, images, list_kernels, submit, verify, models
from . import compare, fastest, references, report
from . import launch_command

COMMANDS = [list_kernels, images, submit, check, verify, report, compare, fastest, references, models, launch_command]
