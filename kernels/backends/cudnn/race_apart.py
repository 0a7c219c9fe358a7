"""cuDNN's engine race in a process of its own, so that the measuring process runs only the chosen plans.

Why: racing some candidate plans leaves a process in a state where later 20-45 us convolutions take
~1 us more per call on the GPU until the process ends (found on H100s with cuDNN 9.19: after kernel
006's backward-data candidates of the inference-server suite, tests/benchmarks/results/
server-conv-fp16-trigger-h100/; the mechanism is not known). A native loop pinned to the chosen plans
never enters it, so the harness read the server's short fp16 convolutions ~3% over it. Here a child
process (one per run, started at the first convolution that needs a race) races each kernel's
directions by engine_choice.py's rule over the same search (search.py: every configuration cuDNN can
build, under the same budget), checks them, and hands back each direction's record (the chosen plan's
name, its index in cuDNN's heuristic list, its engine and knobs, the search's census among them); the
measuring process then builds that very plan (conv.py, as a pin: where the heuristics offered it, else
re-created from its engine and knobs) and times it. The child has the same GPU, settings, seed and padding, and
never runs while the measuring process does: it works only while the parent waits for its answer.

The child is `python -m` race_child.py (CUDA cannot be forked; multiprocessing's spawn would run the
parent's main module again in it), its stdout on the parent's stderr (the harness's stdout is its
events to the host); kernels and records cross two pipes as multiprocessing's pickled messages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Any

from ...catalog import Kernel
from ...padding import PadMode
from ...precision import Precision
from ...results import Settings
from ..contract.base import Unsupported
from .declaration import CUDNN

CHILD_MODULE = __name__.rpartition(".")[0] + ".race_child"
# Between kernels the child keeps at most this much of PyTorch's cached GPU memory (freeing and
# allocating again costs every kernel time; holding more would crowd the measuring process).
KEEP_CACHED_BYTES = 1 << 30
JOIN_S = 5.0  # how long close() waits for the child to end before killing it (it holds nothing to save)
# The child's answers: a direction's records, a true reason it cannot run, or any other failure.
OK, UNSUPPORTED, FAILED = "ok", "unsupported", "failed"


class RaceProcessGone(RuntimeError):
    """The race's process ended without answering (a crash in the library): the kernel fails with this."""


class RaceApart:
    """The measuring process's side: start the child on first use, ask it for a kernel's choices."""

    def __init__(self, settings: Settings) -> None:
        # The child races inline (it is the process apart) and needs no CUPTI (candidates are timed by
        # CUDA graphs and events: timing.graph_events.quick_us) nor a warm-up (the measuring process
        # warms the GPU before its first question: conv.py); nor the measuring process's clock lock (the
        # child would give the clocks back when it ends) or energy meter.
        cudnn = CUDNN.options_of(settings).model_copy(update={"engine_race": "inline"})
        self.settings = settings.model_copy(
            update={
                "backend_options": {**settings.backend_options, CUDNN.name: CUDNN.stored(cudnn)},
                "kernel_time": False,
                "warm_up_s": 0.0,
                "lock_clocks": None,
                "energy": False,
            }
        )
        self._process: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None
        self._receive: Connection | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def choices(
        self, kernel: Kernel, precision: Precision, pad: PadMode, layout: tuple[str, str]
    ) -> dict[str, dict[str, Any]]:
        """{direction: the cuDNN record of its chosen plan}, raced in the child in `layout` ((layout,
        why), as the measuring process runs it) (its pid added: a child
        started again mid-run shows as a new one). Raises Unsupported with the child's reason, or
        RuntimeError with its failure (the kernel's result says which)."""
        send, receive = self._connection()
        try:
            send.send((kernel, precision, pad.value, layout))
            status, answer = receive.recv()
        except (EOFError, OSError):
            code = self._process.wait() if self._process is not None else None
            self.close()  # the next kernel starts a fresh one
            raise RaceProcessGone(
                f"the process racing cuDNN's engines ended without answering (exit code {code})"
            ) from None
        if status == UNSUPPORTED:
            raise Unsupported(answer)
        if status == FAILED:
            raise RuntimeError(f"racing cuDNN's engines: {answer}")
        pid = self.pid
        return {direction: {**record, "race_pid": pid} for direction, record in answer.items()}

    def _connection(self) -> tuple[Connection, Connection]:
        if self._send is None or self._receive is None or self.pid is None:
            self.close()
            theirs_in, ours_out = os.pipe()
            ours_in, theirs_out = os.pipe()
            self._process = subprocess.Popen(
                [sys.executable, "-m", CHILD_MODULE, str(theirs_in), str(theirs_out), str(os.getpid())],
                pass_fds=(theirs_in, theirs_out),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno(),
            )
            os.close(theirs_in)
            os.close(theirs_out)
            self._send, self._receive = Connection(ours_out, readable=False), Connection(ours_in, writable=False)
            self._send.send(self.settings)
        return self._send, self._receive

    def close(self) -> None:
        """End the child (its input closes, it returns); killed if it does not."""
        for conn in (self._send, self._receive):
            if conn is not None:
                conn.close()
        self._send = self._receive = None
        if self._process is not None:
            try:
                self._process.wait(JOIN_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
