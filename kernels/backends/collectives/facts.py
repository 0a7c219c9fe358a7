"""Facts the collective backends record without importing PyTorch (the MPI backend needs none)."""

from __future__ import annotations

from ...system import cpu_model  # noqa: F401 - re-exported for the collective backends


def loaded_library(fragment: str) -> str | None:
    """Path of the shared library this process loaded whose name holds `fragment` (e.g. the
    libmpi that mpi4py opened), read from /proc/self/maps; None where that cannot be read."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = path.rsplit("/", 1)[-1]
                if fragment in name and ".so" in name:
                    return path
    except OSError:
        pass
    return None
