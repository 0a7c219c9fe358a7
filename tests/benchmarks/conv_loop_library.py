"""conv_loop's code (tests/benchmarks/conv_loop.cpp) inside a Python process: build_native.sh builds it
as build/native/libconv_loop.so, whose `conv_loop_run_stdin` runs the program's loop over its stdin and
prints to its stdout. Imports nothing beyond the standard library, so that a diagnosis can run it in a
process that holds nothing else (conv_process_probe.py) as well as beside the harness (conv_interleaved.py)."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "build" / "native" / "libconv_loop.so"


class ConvLoop:
    """conv_loop's code in this process: its stdin and stdout are files while it runs."""

    def __init__(self, path: Path = LIBRARY) -> None:
        if not path.is_file():
            raise FileNotFoundError(f"no {path}: build the native loops first (bash tests/benchmarks/build_native.sh)")
        self.run_stdin = ctypes.CDLL(str(path)).conv_loop_run_stdin

    def run(self, lines: list[str]) -> list[str]:
        """conv_loop's output lines for `lines` (fd 0 and 1 pointed at files for the call, then back)."""
        sys.stdout.flush()
        with tempfile.TemporaryFile("w+") as stdin, tempfile.TemporaryFile("w+") as stdout:
            stdin.write("".join(line + "\n" for line in lines))
            stdin.flush()
            stdin.seek(0)
            saved = os.dup(0), os.dup(1)
            try:
                os.dup2(stdin.fileno(), 0)
                os.dup2(stdout.fileno(), 1)
                self.run_stdin()
            finally:
                os.dup2(saved[0], 0)
                os.dup2(saved[1], 1)
                os.close(saved[0])
                os.close(saved[1])
            stdout.seek(0)
            return stdout.read().splitlines()
