"""One CUDA stream for all of a process's GPU work: inputs, checks, eager calls, graph captures
and replays.

A native loop (conv_loop, nvbench, DeepBench's own binaries) enqueues every kernel of its process
on one stream. The harness ran its eager work on PyTorch's legacy default stream and captured each
graph on a side stream, and read 20-45 us fp16 convolutions 3-8% slower than conv_loop on the very
same cuDNN plan. A probe (conv_process_probe.py `--streams --ways alone one`, in tests/benchmarks/ at 9450c78; H100
GPU-818454c8, 2026-11-25) timed the harness's call captured and replayed on a process's first
stream: with torch's setup work on the legacy stream, 1.031-1.073 of conv_loop for 6 of 12
problems; with every operation of the process on that one stream, at most 1.026 for 11 of 12 (the
12th 1.052). So the GPU work of a process that measures goes on one stream, as in a native loop:
a stream of its own (a graph cannot be captured on the legacy default stream), made torch's
current stream before the first GPU work, on which graph.capture captures as well. In the harness
itself this did not close the gap (the server's fp16 convolutions beside conv_loop, H100
GPU-40b54356: 91 of 100 within 5%, median 1.033, against 92 of 102 and 1.029 before;
tests/benchmarks/results/server-conv-fp16-one-stream-h100/): what remains is a state the process enters
while racing one kernel's candidates (tests/benchmarks/results/server-conv-fp16-trigger-h100/)."""

from __future__ import annotations

import torch


def use_work_stream(device: torch.device) -> torch.cuda.Stream:
    """Make a new stream on `device` torch's current stream there, for the rest of the process
    (the current stream is per thread: the harness does its GPU work on its main thread)."""
    stream = torch.cuda.Stream(device)
    torch.cuda.set_stream(stream)
    return stream


def on_work_stream() -> bool:
    """Whether torch's current stream is a stream of its own, not the legacy default stream (no work
    stream was set: tests, library users)."""
    current = torch.cuda.current_stream()
    return current != torch.cuda.default_stream(current.device)


def capture_stream() -> torch.cuda.Stream:
    """The stream a graph is captured on: the current one, or a side stream where the current one
    is the legacy default stream."""
    return torch.cuda.current_stream() if on_work_stream() else torch.cuda.Stream()
