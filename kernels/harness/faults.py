"""Fault injection, for tests of what the host does when a kernel kills the harness.

DEEPBENCH_FAULT="crash:ID" kills the harness (SIGKILL, as the out-of-memory killer would) when it
starts the kernel whose id starts with ID; "hang:ID" makes that kernel sleep forever; "oom:ID"
allocates host memory until the process dies. Unset in normal runs: it does nothing then."""

from __future__ import annotations

import os
import signal
import time

ENV = "DEEPBENCH_FAULT"


def maybe_inject(item_id: str) -> None:
    spec = os.environ.get(ENV, "")
    kind, _, target = spec.partition(":")
    if not spec or not item_id.startswith(target):
        return
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    elif kind == "oom":
        hog = []
        while True:
            hog.append(bytearray(1 << 28))
