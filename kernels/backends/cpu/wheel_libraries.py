"""Where pip's wheels put the native libraries a CPU backend loads with ctypes (Intel's `mkl` and `onednn`
wheels: `<prefix>/lib`, not a folder inside site-packages), so every such backend looks in the same places
in the same order: the interpreter's prefix (a virtual environment's), then its base's (a venv made with
--system-site-packages over a Python that has the wheels). The loader's own path comes after these, in
each backend."""

from __future__ import annotations

import sys
from pathlib import Path

WHEEL_LIB = "lib"


def wheel_library_dirs() -> list[Path]:
    """The folders pip's wheels put shared libraries in, the environment's first (no repeats)."""
    return list(dict.fromkeys(Path(prefix) / WHEEL_LIB for prefix in (sys.prefix, sys.base_prefix)))


def wheel_library_folder(library: str) -> Path:
    """The first of those folders that holds `library`, else the environment's own (where a wheel would
    have put it: the folder an error message names)."""
    dirs = wheel_library_dirs()
    return next((folder for folder in dirs if (folder / library).is_file()), dirs[0])
