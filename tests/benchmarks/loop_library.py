"""The native loops' code inside a Python process: build_native.sh builds gemm_loop.cu and conv_loop.cpp
also as build/native/libgemm_loop.so and libconv_loop.so, whose `<loop>_run_stdin` runs the program's loop
over its stdin and prints to its stdout. Imports nothing beyond the standard library, so that a diagnosis
can run a loop in a process that holds nothing else (conv_process_probe.py, at 9450c78) as well as beside
the harness (interleaved.py)."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from pathlib import Path

BUILD = Path(__file__).resolve().parents[2] / "build" / "native"
# op -> the library build_native.sh makes of its loop, and the loop's entry point there
LIBRARIES = {
    "gemm": (BUILD / "libgemm_loop.so", "gemm_loop_run_stdin"),
    "conv": (BUILD / "libconv_loop.so", "conv_loop_run_stdin"),
}


class LoopLibrary:
    """A native loop's code in this process: its stdin and stdout are files while it runs."""

    def __init__(self, op: str, path: Path | None = None) -> None:
        default, entry = LIBRARIES[op]
        path = path or default
        if not path.is_file():
            raise FileNotFoundError(f"no {path}: build the native loops first (bash tests/benchmarks/build_native.sh)")
        self.run_stdin = getattr(ctypes.CDLL(str(path)), entry)

    def run(self, lines: list[str]) -> list[str]:
        """The loop's output lines for `lines` (fd 0 and 1 pointed at files for the call, then back)."""
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
