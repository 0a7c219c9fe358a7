"""CUPTI's record of the GPU's work, read through torch.profiler: which kernels ran, and when each
began and ended on the GPU's own clock.

Two users: the hot measurement of short calls by kernel time (cupti_kernel.py: a kernel's own
duration, without the gap the GPU leaves between two dependent kernels) and the cross-check of
any measurement (profiler_check.py, --verify-timing). Samples are told apart by a marker kernel
enqueued before each; a call's kernels by their count per call.

Only the kernels' raw records are read (torch's Kineto events), not torch's event tree, which
takes the host many times longer, and kernel time reads a batch every few tens of milliseconds.

Once started, CUPTI stays attached to the process and slows later GPU work, recorded or not: the
host's eager launches most, graph replays barely. Detaching after every recording (Kineto's
TEARDOWN_CUPTI=1, or cuptiFinalize through cupti-python) is not used: it crashed later kernels
("unspecified launch failure") and graphs captured before it. cupti-python's recordings are
free to start and stop but slow to flush, so torch.profiler is used."""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

DeviceEvent = tuple[float, float, str]  # start us, end us, kernel name
NS_TO_US = 1e-3
MARKER_KERNEL = "spin_kernel"  # torch.cuda._sleep's kernel
MARKER_CYCLES = 100  # a marker, not a rest: the GPU stays as loaded as when it was timed

_started = False


def mark_sample() -> None:
    """Enqueue the marker that opens a sample in the record."""
    torch.cuda._sleep(MARKER_CYCLES)


@contextmanager
def _profiling() -> Iterator[Any]:
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.profiler's notices (events cleared per cycle)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            yield prof


def start_once() -> None:
    """CUPTI's first start in a process takes seconds: made once, empty, before the first
    recording, so that no measured GPU waits for it."""
    global _started
    if not _started:
        with _profiling():
            pass
        _started = True


def attached() -> bool:
    """Whether CUPTI was started in this process: it then stays attached and slows host launches."""
    return _started


@contextmanager
def recording() -> Iterator[Any]:
    """A torch.profiler session recording the GPU work enqueued inside the block (read it with
    device_events after the block)."""
    start_once()
    with _profiling() as prof:
        yield prof


def device_events(prof: Any) -> list[DeviceEvent]:
    """The GPU activities (kernels, memsets, copies) a finished recording holds, in start order."""
    from torch.autograd import DeviceType

    return sorted(
        (e.start_ns() * NS_TO_US, (e.start_ns() + e.duration_ns()) * NS_TO_US, e.name())
        for e in prof.profiler.kineto_results.events()
        if e.device_type() == DeviceType.CUDA
    )


def split_at_markers(events: list[DeviceEvent], marker: str = MARKER_KERNEL) -> list[list[DeviceEvent]]:
    """Device events grouped by sample: a group holds what ran after one marker kernel and before
    the next. Whatever precedes the first marker (the warm replays' tail) belongs to no sample."""
    groups: list[list[DeviceEvent]] = []
    for event in events:
        if marker in event[2]:
            groups.append([])
        elif groups:
            groups[-1].append(event)
    return groups


def kernel_spans(intervals: list[tuple[float, float]], per_call: int) -> list[float]:
    """Per-call spans (first kernel's start to last kernel's end, us) of `per_call` kernels a call."""
    if per_call < 1:
        return []
    return [intervals[i + per_call - 1][1] - intervals[i][0] for i in range(0, len(intervals) - per_call + 1, per_call)]


def chunk_times_us(group: list[DeviceEvent], calls: int, chunk: int) -> list[float]:
    """A replay of `calls` calls cut into samples of `chunk` consecutive calls (all of them when
    `chunk` is under 1), each the mean span of its calls' kernels (first start to last end, so a
    wait inside a call, such as split-K's before its reduction, counts, and the gap between one
    call and the next does not); a remainder of fewer than `chunk` calls is left out. When the
    kernels do not divide among the calls: one value, the replay's period per call (first start to
    last end of all, gaps included)."""
    if not group or len(group) % calls:
        return [(group[-1][1] - group[0][0]) / calls if group else float("nan")]
    chunk = chunk if chunk >= 1 else calls
    spans = kernel_spans([(a, b) for a, b, _ in group], len(group) // calls)
    return [sum(spans[i : i + chunk]) / chunk for i in range(0, calls - chunk + 1, chunk)]


def call_time_us(group: list[DeviceEvent], calls: int) -> float:
    """One sample's time per call: chunk_times_us with the whole replay as one chunk."""
    return chunk_times_us(group, calls, calls)[0]


def sample_figures(groups: list[list[DeviceEvent]], calls: int, timed: list[float]) -> dict[str, Any]:
    """Per call, medians over the samples of each sample's mean: busy (the kernels' summed
    durations), span (a call's first kernel start to its last kernel end: adds the gaps inside
    one call, e.g. split-K's reduction) and period (a sample's first start to last end: adds the
    gaps between calls); with the kernels a call launches, the commonest kernel names, and the
    events' own figures for the same samples (`timed`, us per call): their median and their ratio
    to busy. Means within a sample, because CUPTI's timestamps come in steps of a fraction of a
    microsecond, so the median of single calls is off by up to a step."""
    busy = [sum(b - a for a, b, _ in g) / calls for g in groups]
    period = [(g[-1][1] - g[0][0]) / calls for g in groups]
    kernels = sum(len(g) for g in groups)
    alike = all(len(g) == len(groups[0]) for g in groups) and len(groups[0]) % calls == 0
    spans = [call_time_us(g, calls) for g in groups] if alike else []
    names: dict[str, int] = {}
    for g in groups:
        for _, _, name in g:
            names[name] = names.get(name, 0) + 1
    top = sorted(names.items(), key=lambda kv: -kv[1])[:3]
    return {
        "kernel_us": statistics.median(busy),
        "span_us": statistics.median(spans) if spans else None,
        "period_us": statistics.median(period),
        "kernels_per_call": kernels / (calls * len(groups)),
        "kernel_names": [n[:120] for n, _ in top],
        "events_us": statistics.median(timed),
        "timer_ratio": statistics.median(t / b for t, b in zip(timed, busy, strict=False)),
    }


def call_us(prof: dict[str, Any]) -> float:
    """A call's time as the profiler sees it: from its first kernel's start to its last kernel's
    end (span), which for a call of several dependent kernels (cuBLAS's split-K GEMM and its
    reduction) counts the wait between them, a cost of the call; the summed kernel durations
    where the calls' kernels could not be told apart."""
    span = prof.get("span_us")
    return span if span else prof["kernel_us"]
