"""Facts about the machine the harness runs on, collected without PyTorch."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
from typing import Any


def host_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "logical_cpus": os.cpu_count(),
        "in_container": os.path.exists("/.dockerenv") or os.environ.get("DEEPBENCH_IN_CONTAINER") == "1",
    }
    with contextlib.suppress(AttributeError):
        facts["usable_cpus"] = len(os.sched_getaffinity(0))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    facts["memory_gib"] = round(int(line.split()[1]) / 2**20, 2)
                    break
    except OSError:
        pass
    return facts
