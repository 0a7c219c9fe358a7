"""User-facing errors: one line, what to do, exit status 2, never a traceback."""

from __future__ import annotations

from ..kernels.harness.protocol import ExitCode


class UserError(Exception):
    """A mistake the user can fix (bad choice, missing file, no Docker ...). The message is
    printed as one line after 'error:'; it should name the valid choices or the next step."""

    def __init__(self, message: str, exit_code: int = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
