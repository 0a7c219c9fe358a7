"""The child of race_apart.py: races each kernel it is sent, in a process of its own.

`python -m deepbench.kernels.backends.cudnn.race_child IN_FD OUT_FD PARENT_PID`, started by
race_apart.RaceApart: reads the settings, then (kernel, precision, padding, layout) questions from IN_FD, and
answers each on OUT_FD with race_apart's (OK | UNSUPPORTED | FAILED, ...) until IN_FD closes."""

from __future__ import annotations

import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

import torch

from ...catalog import Kernel
from ...lifeline import end_with_parent
from ...padding import PadMode
from ...precision import Precision
from ...results import Settings
from ..contract.base import Unsupported
from .backend import CudnnBackend
from .race_apart import FAILED, KEEP_CACHED_BYTES, OK, UNSUPPORTED


def serve(receive: Connection, send: Connection, parent: int) -> None:
    """Race each kernel sent, answer with its directions' records, until the pipe closes."""
    end_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the parent's to handle
    settings: Settings = receive.recv()
    try:
        backend: CudnnBackend | None = CudnnBackend(settings)
        cannot = ""
    except Exception as exc:  # noqa: BLE001 - no GPU here: every request is told why
        backend, cannot = None, f"the process racing cuDNN's engines cannot start: {type(exc).__name__}: {exc}"
    while True:
        try:
            kernel, precision, pad, layout = receive.recv()
        except (EOFError, OSError):
            return
        if backend is None:
            send.send((FAILED, cannot))
            continue
        answer = _race(backend, kernel, precision, PadMode(pad), layout)
        if torch.cuda.memory_reserved() > KEEP_CACHED_BYTES:
            torch.cuda.empty_cache()  # the measuring process gets the memory back before it goes on
        send.send(answer)


def _race(
    backend: CudnnBackend, kernel: Kernel, precision: Precision, pad: PadMode, layout: tuple[str, str]
) -> tuple[str, Any]:
    """(OK, {direction: record}), (UNSUPPORTED, reason) or (FAILED, what went wrong), raced in
    `layout` ((layout, why): the one the measuring process runs the kernel in)."""
    if backend.lib is None:
        return UNSUPPORTED, f"the cudnn backend cannot run here: {backend.missing}"
    try:
        with backend.ctx.padding(pad), backend.in_layout(*layout):
            prepared = backend.prepare(kernel, precision)
        return OK, {p.direction: p.info["cudnn"] for p in prepared.parts}
    except Unsupported as exc:
        return UNSUPPORTED, str(exc)
    except Exception as exc:  # noqa: BLE001 - any library error is the kernel's, told to the parent
        return FAILED, f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        backend.release()


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False), int(sys.argv[3]))
