"""Is it the process or the call? (A diagnosis script for issue 20: needs an NVIDIA GPU, the cuDNN
backend's bindings and build_native.sh's build/native/conv_loop and libconv_loop.so.)

The harness times some short fp16 convolutions 3-8% slower than conv_loop on the very same cuDNN
plan, and conv_gap_probe.py ruled out the timer, the allocator and idle gaps. This script bisects:
conv_loop's own code (the library build) is timed inside Python processes that hold more and more
of what the harness's process holds, and, in the last one, beside the harness's own call (the
Python frontend's execute_plan_at_index, timed by the harness's quick timer):

  exe      conv_loop, the plain C++ process
  bare     libconv_loop.so in a Python process that imported nothing else
  torch    ... after `import torch`
  cuda     ... after PyTorch made its CUDA context and allocated memory
  backend  ... after the harness loaded its cuDNN backend (cudnn-frontend's Python module, a handle)
  python   the harness's call in that same process: the plan found by name, graph replays of it
           back to back (quick_us) and, like conv_loop's graph figure, one replay per sample (gapped)

Every figure is conv_loop's graph figure (or the harness's) in us per call. With --kernels the last
process also lists the CUDA kernels each of the two calls launches (torch.profiler), by name and
average duration, for the first problem: a different kernel or a slower one shows there.

With --captures the last process times the harness's call, a graph of as many calls as conv_loop
puts in one (a sample of about 2 ms), replayed back to back, three ways: captured by PyTorch and
replayed on the legacy default stream (the harness's quick timer), the same replayed on a stream
of its own, and captured and launched by the CUDA runtime itself on a non-blocking stream, as
conv_loop does; and the kernels' gaps (start of one minus the end of the one before) in each.

With --graphs DIR (one process, no ladder, no profiler) it writes the first problem's graphs as DOT files
(cudaGraphDebugDotPrint, verbose: every node's parameters and launch attributes) to DIR: the harness's call,
two calls captured by the CUDA runtime (harness.dot), and conv_loop's graph (conv_loop.dot, loop_timing.h's
LOOP_GRAPH_DOT); then, per problem, ROUNDS rounds of conv_loop's code and the harness's call (quick and
gapped) one after the other, so that a figure that moves with what ran before shows as a drift between
rounds and a difference of the call as a steady ratio.

With --state (no profiler, CUPTI never started) it asks when a process's figures move: conv_loop in a
process of its own, then its code in one Python process after each step of what the harness's process
goes through (STATE_STEPS: nothing, torch and a CUDA context, the cuDNN backend, the harness's calls
captured and replayed, those graphs freed, STATE_IDLE_S idle; or those --steps names, CUPTI_STEPS among
them: CUPTI attached, a recording that holds GPU work, work after it; TRIGGER_STEPS: lines of a --trigger file
through conv_loop's code; CONTEXT_STEPS: the context's limits or cache configuration set again, large
allocations), then conv_loop in a process of its own again: a table of conv_loop's graph figure per problem and
step, and the context's limits after each step (results/server-conv-fp16-trigger-h100/).

With --passes it asks whether it is PyTorch at all, and what of a pass the next one inherits: conv_loop's
code run PASSES times in a row in Python processes that import nothing else, one process per setting of
PASS_ENVS: none (each pass makes and destroys a cuDNN handle and a timer with its stream and events of its
own), conv_loop.cpp's LOOP_KEEP (later passes reuse the first pass's handle, stream, timer, or all), and
CUDA_DEVICE_MAX_CONNECTIONS (how many hardware queues the process's streams share; the driver's default 8);
--settings names others: conv_loop.cpp's LOOP_IDLE_STREAM (one more stream, never used, made before or after
the timer's, or made and destroyed first) and LOOP_STREAM=per-thread (the per-thread default stream, none made).

With --streams it asks what the harness would read on such a first stream: the harness's quick timer on
each problem in a process of its own per way of STREAM_WAYS, its replays on PyTorch's default (legacy)
stream as in the harness, on a non-blocking stream made before anything else in the process, or on one
made after the cuDNN backend was loaded, or (first-capture) the call captured by the CUDA runtime on that
first stream and launched there, as conv_loop does; beside conv_loop in a process of its own. 'per-thread'
replays on the per-thread default stream (a stream nobody makes). The 'alone' ways leave the harness's timer
out: the call captured by the runtime on the first stream and launched there (alone) or on the legacy default
stream (alone-default), PyTorch's stream pool (made whole at the first torch.cuda.Stream()) never made.
'one' is 'alone' with every GPU operation of the process on that first stream (torch's current stream from
before the CUDA context on: the backend's first work, the inputs, the eager calls), as conv_loop enqueues all
its kernels on its timer's stream: does work on another stream before make the difference?
--ways picks ways.

With --buffers (one process, no ladder) it times, per problem, the harness's call on torch's
random values, on conv_loop's own values and on cudaMalloc'd buffers holding them, then conv_loop's
code right after, each with the mean SM clock NVML read while it ran.

    python tests/benchmarks/conv_process_probe.py LINES [--kernels | --captures | --buffers | --graphs DIR]
    python tests/benchmarks/conv_process_probe.py LINES [--state | --passes | --streams]

LINES holds conv_loop input lines with plan names (native_side_by_side.py --dry-run prints them).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import subprocess
import sys
import types
from pathlib import Path

from loop_library import LoopLibrary  # beside this file; the standard library only

NATIVE = Path(__file__).resolve().parents[2] / "build" / "native"
LEVELS = ("bare", "torch", "cuda", "backend")
SAMPLE_S = 0.002          # conv_loop's MIN_TRIAL_MS, the length of one sample
SAMPLES = 30
PROFILED_CALLS = 50
ROUNDS = 3                # --graphs: rounds of conv_loop's code and the harness's call per problem
DOT_CALLS = 2             # --graphs: calls in the harness's graph written as DOT
DOT_VERBOSE = 1           # cudaGraphDebugDotFlagsVerbose
STATE_STEPS = ("bare", "cuda", "backend", "harness-calls", "graphs-freed", "idle")
# --steps may also name: CUPTI attached by the harness's empty first recording (cupti.start_once), a recording
# that holds GPU work (a few matrix products), and that work again after the recording ended.
CUPTI_STEPS = ("cupti-attached", "cupti-recorded", "after-recording")
# and "trigger-N": line N (from 0) of the --trigger file through conv_loop's code first (its output not kept), to
# find which library work leaves a process's later figures slower.
TRIGGER_STEPS = tuple(f"trigger-{n}" for n in range(20))
# and "reset-stack": the context's stack-size limit (cudaLimitStackSize) set back to what it was at the first step;
# "stack-flip": that limit doubled and set back (the driver re-sizes the context's local memory both times);
# "cache-reset": the context's cache configuration set to cudaFuncCachePreferNone (the default).
# After every step the child prints the context's limits (cudaDeviceGetLimit), to see what library work changed.
# "malloc-N": N GiB cudaMalloc'd, set to zero and freed (does a large allocation's history move the figures?).
CONTEXT_STEPS = ("reset-stack", "stack-flip", "cache-reset", "malloc-1", "malloc-4", "malloc-16")
GIB = 1 << 30
LIMITS = ("cudaLimitStackSize", "cudaLimitMallocHeapSize", "cudaLimitPrintfFifoSize", "cudaLimitMaxL2FetchGranularity",
          "cudaLimitPersistingL2CacheSize")
STATE_IDLE_S = 20.0
PASSES = 3
CHILD_TIMEOUT_S = 600    # one child process of a question (or conv_loop's program)
STREAM_WAYS = ("default", "first", "late", "first-capture", "per-thread", "alone", "alone-default", "one")
PER_THREAD_STREAM = 2     # cudaStreamPerThread: the calling thread's default stream (made by none)
PASS_ENVS = ("", "LOOP_KEEP=handle", "LOOP_KEEP=stream", "LOOP_KEEP=timer", "LOOP_KEEP=all",
             "CUDA_DEVICE_MAX_CONNECTIONS=1")


def run_library(lines: Path) -> None:
    """conv_loop's loop over the file `lines`, in this process; its output lines printed here."""
    out = LoopLibrary("conv", NATIVE / "libconv_loop.so").run(lines.read_text().splitlines())
    print("\n".join(out), flush=True)


def new_stream() -> int:
    """A non-blocking stream from the CUDA runtime (the process's first CUDA call also makes its context)."""
    from cuda.bindings import runtime as rt
    err, raw = rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking)
    assert err == rt.cudaError_t.cudaSuccess, err
    return int(raw)


def prepare(level: str) -> None:
    """Make this process hold what `level` names, in the order the harness's process gets it."""
    if level == "bare":
        return
    import torch
    if level == "torch":
        return
    torch.zeros(1 << 20, device="cuda").sum().item()
    if level == "cuda":
        return
    from deepbench.kernels.backends import load_backend
    from deepbench.kernels.results import Settings
    globals()["BACKEND"] = load_backend("cudnn", Settings(device="cuda", warm_up_s=0.0))


MEMORY = ("torch", "loop-data", "cudamalloc")
MASK32 = 0xFFFFFFFF


def loop_normal(n: int, seed: int):
    """conv_loop's inputs (loop_timing.h normal_at: Box-Muller on two hashed uniforms), on the GPU."""
    import torch

    def uniform(seed: int):
        h = (torch.arange(n, dtype=torch.int64, device="cuda") * 2654435761) & MASK32
        h = h ^ ((seed * 0x9E3779B9) & MASK32)
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & MASK32  # int64 products wrap; their low 32 bits are the unsigned ones
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & MASK32
        h ^= h >> 16
        return (h & 0xFFFFFF).float() / float(0x800000) - 1.0
    u1 = (uniform(seed) + 1.0) * 0.5 + 0.5 / float(0x1000000)
    u2 = (uniform(seed ^ 0x5BD1E995) + 1.0) * 0.5
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(6.2831853 * u2)


def cudamalloc_like(t):
    """A tensor over memory of its own from cudaMalloc (as conv_loop gets its buffers), holding `t`."""
    import torch
    from cuda.bindings import runtime as rt
    err, ptr = rt.cudaMalloc(max(t.numel() * t.element_size(), 1))
    assert err == rt.cudaError_t.cudaSuccess, err
    typestr = {torch.float16: "<f2", torch.bfloat16: "<f2", torch.float32: "<f4", torch.int8: "|i1",
               torch.uint8: "|u1"}[t.dtype]

    # The CUDA array interface: torch wraps the memory without copying (never freed: a probe).
    raw = types.SimpleNamespace(__cuda_array_interface__={
        "shape": tuple(t.shape), "typestr": typestr, "data": (int(ptr), False), "version": 3, "strides": None})
    out = torch.as_tensor(raw, device="cuda").view(t.dtype)
    out.copy_(t)
    return out


def python_call(line: str, memory: str = "torch"):
    """The harness's call for one conv_loop line: the graph, the plan found by its name, tensors
    (memory: torch's random values from its caching allocator, as the harness has them; conv_loop's
    values there; conv_loop's values in cudaMalloc'd buffers, workspace included)."""
    import torch

    from deepbench.kernels.backends.cudnn import conv, graphs
    from deepbench.kernels.catalog import ConvKernel
    from deepbench.kernels.precision import Precision

    f = line.split()
    precision, direction = Precision(f[0]), f[1]
    n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w = map(int, f[2:13])
    kk = ConvKernel(set="inference_server", index=0, n=n, c=c, h=h, w=w, k=k, r=r, s=s, pad_h=pad_h, pad_w=pad_w,
                    stride_h=stride_h, stride_w=stride_w)
    backend = globals()["BACKEND"]
    g, roles = graphs.build(backend.lib, backend.handle.handle, kk, precision, direction)
    plan = conv._named_plan(backend.lib, g, f[13])
    dtype = graphs.TORCH_DTYPES[precision]
    shapes = {"x": (n, c, h, w), "w": (k, c, r, s), "y": (n, k, kk.out_h, kk.out_w)}
    shapes.update(dy=shapes["y"], dx=shapes["x"], dw=shapes["w"])
    scale = {"w": (c * r * s) ** -0.5}
    pack = {}
    for seed, (role, t) in enumerate(roles.items(), start=1):  # inputs first, in conv_loop's order
        numel = math.prod(shapes[role])
        values = (loop_normal(numel, seed).view(shapes[role]) if memory != "torch" and seed < 3
                  else torch.randn(shapes[role], device="cuda"))
        pack[t] = (values * scale.get(role, 1.0)).to(dtype)
    ws = torch.empty(max(plan.workspace, 1), dtype=torch.uint8, device="cuda")
    if memory == "cudamalloc":
        pack = {t: cudamalloc_like(v) for t, v in pack.items()}
        ws = cudamalloc_like(ws)
    handle = backend.handle

    def call() -> None:
        g.execute_plan_at_index(pack, ws, plan.index, handle=handle.bind())
    return call


def short_run_file(line: str) -> Path:
    """A file holding `line` with its seconds cut to one sample's: conv_loop's code run under a profiler."""
    short = Path(f"/tmp/conv_process_probe.{os.getpid()}.short")
    short.write_text(" ".join(line.split()[:-1]) + f" {SAMPLE_S}\n")
    return short


def graph_ways(call, calls: int) -> dict:
    """The call's graph of `calls` calls, as launchers: (launch, the stream it launches on) by way. The
    graphs live as long as the closures that launch them (torch's is bound to its replay)."""
    import torch
    from cuda.bindings import runtime as rt

    from deepbench.kernels.timing.graph import capture
    ok = rt.cudaError_t.cudaSuccess
    torch_graph = capture(call, calls)
    graph, raw = runtime_graph(call, calls)
    err, exe = rt.cudaGraphInstantiate(graph, 0)
    assert err == ok, err
    return {"torch-default": (torch_graph.replay, torch.cuda.default_stream()),
            "torch-side": (torch_graph.replay, torch.cuda.Stream()),
            "runtime": (lambda: rt.cudaGraphLaunch(exe, raw), torch.cuda.ExternalStream(int(raw)))}


def back_to_back_us(launch, calls: int, stream) -> float:
    """The median us per call of back-to-back launches (the harness's BackToBack sampler)."""
    import torch

    from deepbench.kernels.timing.graph_events import BackToBack
    with torch.cuda.stream(stream):
        samples = BackToBack(launch, calls)
        samples.take()
        figure = statistics.median(samples.take() for _ in range(SAMPLES))
        torch.cuda.synchronize()
    return figure


def kernel_gaps(run) -> str:
    """Median and share of negative gaps between consecutive kernels of `run` (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type.name == "CUDA" and not e.name.startswith(("Memcpy", "Memset")))
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    if not gaps:
        return "no kernels"
    return (f"{len(spans)} kernels, gap median {statistics.median(gaps):.2f} us, "
            f"{sum(g < 0 for g in gaps) / len(gaps):.0%} overlapping")


def kernel_table(title: str, run) -> None:
    """The CUDA kernels `run` launches, by name: count and average duration (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.count]
    print(f"# kernels: {title}")
    for e in sorted(rows, key=lambda e: -e.device_time_total):
        print(f"#   {e.count:6d} x {e.device_time_total / e.count:9.2f} us  {e.key[:150]}")


class ClockTrace:
    """The SM clock (NVML), read about every millisecond by a thread: the mean over a window."""

    def __init__(self) -> None:
        import threading

        import pynvml
        pynvml.nvmlInit()
        self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        self.readings: list[tuple[float, int]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        import time
        while True:
            mhz = self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)
            self.readings.append((time.perf_counter(), mhz))
            time.sleep(0.001)

    def mean_mhz(self, run) -> tuple[object, float]:
        """`run`'s result and the mean SM clock while it ran."""
        import time
        t0 = time.perf_counter()
        out = run()
        window = [mhz for t, mhz in self.readings[-20000:] if t >= t0]
        return out, (sum(window) / len(window) if window else float("nan"))


def child_buffers(lines: Path) -> None:
    """Per problem, interleaved: the harness's call on three kinds of memory (MEMORY), each a graph
    of the same calls replayed back to back, then conv_loop's code on it in this process; for
    the first problem, the kernels' durations of each (torch.profiler)."""
    import torch

    from deepbench.kernels.timing.graph import capture
    from deepbench.kernels.timing.graph_events import quick_us
    prepare("backend")
    clock = ClockTrace()
    one = Path(f"/tmp/conv_process_probe.{os.getpid()}")
    for i, line in enumerate(ln for ln in lines.read_text().splitlines() if ln.strip()):
        one.write_text(line + "\n")
        calls = 0
        figures = {}
        for memory in MEMORY:
            call = python_call(line, memory)
            calls = calls or max(1, round(SAMPLE_S * 1e6 / quick_us(call, min_sample_s=SAMPLE_S, samples=SAMPLES)))
            graph = capture(call, calls)
            figures[memory] = clock.mean_mhz(
                lambda g=graph, n=calls: back_to_back_us(g.replay, n, torch.cuda.current_stream()))
            if i == 0:
                kernel_table(f"the harness's call on {memory} memory, 3 graph replays",
                             lambda r=graph.replay: [r() for _ in range(3)])
        print(f"buffers {i} {calls} " + " ".join(f"{m}={us:.4f}@{mhz:.0f}MHz" for m, (us, mhz) in figures.items()),
              flush=True)
        _, mhz = clock.mean_mhz(lambda: run_library(one))
        print(f"# conv_loop's code above ran at {mhz:.0f} MHz on average", flush=True)
        if i == 0:
            short = short_run_file(line)
            kernel_table("conv_loop's code in this process (warm-up, calibration, loop, graph)",
                         lambda f=short: run_library(f))


def runtime_graph(call, calls: int, raw=None):
    """`calls` calls captured by the CUDA runtime on a non-blocking stream (`raw`, else a new one), as
    conv_loop captures them: (graph, the stream)."""
    import torch
    from cuda.bindings import runtime as rt
    ok = rt.cudaError_t.cudaSuccess
    if raw is None:
        raw = new_stream()
    with torch.cuda.stream(torch.cuda.ExternalStream(int(raw))):
        call()
        torch.cuda.synchronize()
        (err,) = rt.cudaStreamBeginCapture(raw, rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal)
        assert err == ok, err
        for _ in range(calls):
            call()
        err, graph = rt.cudaStreamEndCapture(raw)
        assert err == ok, err
    return graph, raw


def child_graphs(lines: Path, dot_dir: Path) -> None:
    """The first problem's graphs as DOT files, then ROUNDS rounds per problem of conv_loop's code
    (its own output line) and the harness's call ("rounds PROBLEM ROUND QUICK GAPPED"); no profiler."""
    from conv_gap_probe import gapped_us
    from cuda.bindings import runtime as rt

    from deepbench.kernels.timing.graph_events import quick_us
    prepare("backend")
    dot_dir.mkdir(parents=True, exist_ok=True)
    one = Path(f"/tmp/conv_process_probe.{os.getpid()}")
    for i, line in enumerate(ln for ln in lines.read_text().splitlines() if ln.strip()):
        one.write_text(line + "\n")
        call = python_call(line)
        if i == 0:
            graph, _ = runtime_graph(call, DOT_CALLS)
            (err,) = rt.cudaGraphDebugDotPrint(graph, str(dot_dir / "harness.dot").encode(), DOT_VERBOSE)
            print(f"# harness.dot: {err}", flush=True)
            os.environ["LOOP_GRAPH_DOT"] = str(dot_dir / "conv_loop.dot")
            run_library(short_run_file(line))
            del os.environ["LOOP_GRAPH_DOT"]
        for r in range(ROUNDS):
            run_library(one)
            print(f"rounds {i} {r} {quick_us(call, min_sample_s=SAMPLE_S, samples=SAMPLES):.4f} "
                  f"{gapped_us(call, SAMPLES):.4f}", flush=True)


def context_limits() -> dict[str, int]:
    """The current CUDA context's limits (cudaDeviceGetLimit), by name; empty before a context exists."""
    from cuda.bindings import runtime as rt
    out = {}
    for name in LIMITS:
        err, value = rt.cudaDeviceGetLimit(getattr(rt.cudaLimit, name))
        if err == rt.cudaError_t.cudaSuccess:
            out[name] = int(value)
    err, cache = rt.cudaDeviceGetCacheConfig()
    if err == rt.cudaError_t.cudaSuccess:
        out["cacheConfig"] = int(cache)
    return out


def child_state(lines: Path, steps: list[str], trigger: Path | None = None) -> None:
    """conv_loop's code after each of `steps`, each pass after a '# step NAME' line."""
    import gc
    import time
    held: list = []
    first_stack: int | None = None
    for step in steps:
        if step in ("reset-stack", "stack-flip"):
            from cuda.bindings import runtime as rt
            stack = first_stack or 1024
            if step == "stack-flip":
                flip = rt.cudaDeviceSetLimit(rt.cudaLimit.cudaLimitStackSize, 2 * stack)
                print(f"# stack-flip via {2 * stack}: {flip}")
            err, = rt.cudaDeviceSetLimit(rt.cudaLimit.cudaLimitStackSize, stack)
            print(f"# {step} to {stack}: {err}", flush=True)
        elif step.startswith("malloc-"):
            from cuda.bindings import runtime as rt
            size = int(step.split("-")[1]) * GIB
            err, ptr = rt.cudaMalloc(size)
            done = (rt.cudaMemset(ptr, 0, size), rt.cudaDeviceSynchronize(), rt.cudaFree(ptr))
            print(f"# malloc {size}: {err} {done}", flush=True)
        elif step == "cache-reset":
            from cuda.bindings import runtime as rt
            print(f"# cache-reset: {rt.cudaDeviceSetCacheConfig(rt.cudaFuncCache.cudaFuncCachePreferNone)}", flush=True)
        elif step in TRIGGER_STEPS:
            if trigger is None:
                raise SystemExit(f"step {step} needs --trigger FILE")
            line = [ln for ln in trigger.read_text().splitlines() if ln.strip()][int(step.split("-")[1])]
            out = LoopLibrary("conv", NATIVE / "libconv_loop.so").run([line])
            print(f"# {step}: {line} -> {len(out)} plans timed", flush=True)
        elif step in CUPTI_STEPS:
            import torch

            from deepbench.kernels.timing import cupti
            a = torch.randn(1024, 1024, device="cuda")
            if step == "cupti-attached":
                cupti.start_once()
            elif step == "cupti-recorded":
                with cupti.recording() as prof:
                    for _ in range(10):
                        a @ a
                    torch.cuda.synchronize()
                print(f"# recorded {len(cupti.device_events(prof))} GPU activities", flush=True)
            else:
                for _ in range(10):
                    a @ a
                torch.cuda.synchronize()
        elif step == "cuda":
            prepare("cuda")
        elif step == "backend":
            prepare("backend")
        elif step == "harness-calls":
            from deepbench.kernels.timing.graph_events import quick_us
            for line in (ln for ln in lines.read_text().splitlines() if ln.strip()):
                call = python_call(line)
                quick_us(call, min_sample_s=SAMPLE_S, samples=SAMPLES)
                held.append(call)
        elif step == "graphs-freed":
            import torch
            held.clear()
            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        elif step == "idle":
            time.sleep(STATE_IDLE_S)
        limits = context_limits()
        first_stack = first_stack if first_stack is not None else limits.get("cudaLimitStackSize")
        print(f"# limits after {step}: {limits}", flush=True)
        print(f"# step {step}", flush=True)
        run_library(lines)


def exe_figures(lines: Path) -> list[float]:
    """conv_loop's graph figure per line of `lines`, in a process of its own."""
    with lines.open() as stdin:
        out = subprocess.run([str(NATIVE / "conv_loop")], stdin=stdin, capture_output=True, text=True,
                             timeout=CHILD_TIMEOUT_S)
    return graph_figures(out.stdout)


def child_stdout(lines: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    """This script's stdout, run in a process of its own on `lines` with `flags` (a bad exit printed
    with the end of its stderr, and what it printed still returned)."""
    out = subprocess.run([sys.executable, __file__, str(lines), *flags], capture_output=True, text=True,
                         timeout=CHILD_TIMEOUT_S, env=env)
    if out.returncode:
        print(f"# child {' '.join(flags)}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return out.stdout


def print_table(lines: Path, columns: dict[str, list[float]], width: int, tail=None, tail_header: str = "") -> None:
    """One row per problem of `lines`: its figure in each column (NaN where a column is short), and
    `tail(figures)` after them where given."""
    print(f"{'problem':60} " + " ".join(f"{c:>{width}}" for c in columns) + tail_header)
    for i, line in enumerate(ln for ln in lines.read_text().splitlines() if ln.strip()):
        figs = [col[i] if i < len(col) else float("nan") for col in columns.values()]
        print(f"{line[:60]:60} " + " ".join(f"{x:{width}.2f}" for x in figs) + (tail(figs) if tail else ""),
              flush=True)


def state_table(lines: Path, steps: list[str], trigger: Path | None = None) -> None:
    """conv_loop's graph figure per problem: its own process, after each step in one process, its own again."""
    columns = {"exe-before": exe_figures(lines)}
    flags = ("--trigger", str(trigger)) if trigger else ()
    stdout = child_stdout(lines, "--child-state", "--steps", *steps, *flags)
    notes = ("# trigger", "# limits", "# reset", "# stack", "# cache", "# malloc")
    print("\n".join(ln for ln in stdout.splitlines() if ln.startswith(notes)))
    for chunk in stdout.split("# step ")[1:]:
        name, _, rest = chunk.partition("\n")
        name = name.strip() if name.strip() not in columns else f"{name.strip()}-{len(columns)}"  # a step named twice
        columns[name] = graph_figures(rest)
    columns["exe-after"] = exe_figures(lines)
    print_table(lines, columns, 13)


def child_passes(lines: Path) -> None:
    """conv_loop's code PASSES times in this process, each pass after a '# pass K' line."""
    for n in range(PASSES):
        print(f"# pass {n + 1}", flush=True)
        run_library(lines)


def passes_table(lines: Path, settings: list[str]) -> None:
    """conv_loop's graph figure per problem and pass, PASSES passes in one bare process, per setting."""
    columns: dict[str, list[float]] = {}
    for n, setting in enumerate(settings):
        name, _, value = setting.partition("=")
        env = dict(os.environ, **({name: value} if setting else {}))
        stdout = child_stdout(lines, "--child-passes", env=env)
        print(f"# s{n}: {setting or 'nothing set'}")
        for chunk in stdout.split("# pass ")[1:]:
            number, _, rest = chunk.partition("\n")
            columns[f"s{n}p{number.strip()}"] = graph_figures(rest)
    print("# columns: sN = the setting above, pK = the K-th pass in that process")
    print_table(lines, columns, 8)


def alone_us(call, raw: int, launch_on: int) -> float:
    """The harness's call captured by the runtime on `raw`, the process's only stream, and replayed back
    to back on `launch_on` (raw, or 0: the legacy default stream), PyTorch's stream pool never made."""
    import torch

    from deepbench.kernels.timing.events import time_eager
    with torch.cuda.stream(torch.cuda.ExternalStream(raw)):
        call()
        calls = max(1, round(SAMPLE_S * 1e6 / time_eager(call, 3)))
    where = torch.cuda.ExternalStream(raw) if launch_on else torch.cuda.default_stream()
    return runtime_replay_us(call, calls, raw, launch_on, where)


def runtime_replay_us(call, calls: int, raw: int, launch_on: int, where) -> float:
    """`calls` calls captured by the CUDA runtime on `raw`, the graph launched back to back on `launch_on`
    (`where`: the same stream as PyTorch's, for the sampler's events)."""
    from cuda.bindings import runtime as rt
    graph, _ = runtime_graph(call, calls, raw)
    err, exe = rt.cudaGraphInstantiate(graph, 0)
    assert err == rt.cudaError_t.cudaSuccess, err
    return back_to_back_us(lambda: rt.cudaGraphLaunch(exe, launch_on), calls, where)


def child_streams(way: str, lines: Path) -> None:
    """The harness's quick timer per problem ('stream US' lines), its replays on the stream `way` names."""
    import torch  # no CUDA context yet: importing makes none

    from deepbench.kernels.timing.graph_events import quick_us
    raw = new_stream() if way.startswith(("first", "alone")) or way == "one" else None
    if way == "one":  # every later torch operation on that stream, the cuDNN backend's handle bound there too
        torch.cuda.set_stream(torch.cuda.ExternalStream(raw))
    prepare("backend")
    raw = new_stream() if way == "late" else raw
    stream = torch.cuda.ExternalStream(raw) if raw is not None else torch.cuda.default_stream()
    if way == "per-thread":
        stream = torch.cuda.ExternalStream(PER_THREAD_STREAM)
    for line in (ln for ln in lines.read_text().splitlines() if ln.strip()):
        call = python_call(line)
        if way.startswith("alone") or way == "one":
            print(f"stream {alone_us(call, raw, 0 if way == 'alone-default' else raw):.4f}", flush=True)
            continue
        with torch.cuda.stream(stream):
            quick = quick_us(call, min_sample_s=SAMPLE_S, samples=SAMPLES)
        if way == "first-capture":  # captured on that first stream too, by the runtime, and launched there
            quick = runtime_replay_us(call, max(1, round(SAMPLE_S * 1e6 / quick)), raw, raw, stream)
        print(f"stream {quick:.4f}", flush=True)


def streams_table(lines: Path, ways: list[str]) -> None:
    """conv_loop in a process of its own beside the harness's quick timer on each way's stream."""
    columns = {"exe": exe_figures(lines)}
    for way in ways:
        stdout = child_stdout(lines, "--child-streams", way)
        columns[way] = [float(ln.split()[1]) for ln in stdout.splitlines() if ln.startswith("stream ")]
    print_table(lines, columns, 8, lambda figs: "  " + " ".join(
        f"{x / figs[0]:>{len(w) + 4}.3f}" for w, x in zip(ways, figs[1:], strict=True)),
        "  " + " ".join(f"{w}/exe" for w in ways))


def child(level: str, lines: Path, kernels: bool, captures: bool) -> None:
    prepare(level)
    run_library(lines)
    if level != "backend":
        return
    from conv_gap_probe import gapped_us  # conv_loop's graph timing, as conv_gap_probe.py takes it (beside this file)

    from deepbench.kernels.timing.graph_events import quick_us
    problems = [ln for ln in lines.read_text().splitlines() if ln.strip()]
    for i, line in enumerate(problems):
        call = python_call(line)
        if captures:
            quick = quick_us(call, min_sample_s=SAMPLE_S, samples=SAMPLES)
            calls = max(1, round(SAMPLE_S * 1e6 / quick))
            ways = graph_ways(call, calls)
            figures = {w: back_to_back_us(launch, calls, where) for w, (launch, where) in ways.items()}
            print(f"captures {i} {calls} " + " ".join(f"{w}={us:.4f}" for w, us in figures.items()), flush=True)
            if i == 0:
                for w, (launch, where) in ways.items():
                    print(f"# gaps {w}: {kernel_gaps(lambda ln=launch, wh=where: _in(wh, ln, 3))}", flush=True)
                short = short_run_file(line)
                gaps = kernel_gaps(lambda f=short: run_library(f))
                print(f"# gaps conv_loop in this process: {gaps}", flush=True)
            continue
        print(f"python {i} {quick_us(call, min_sample_s=SAMPLE_S, samples=SAMPLES):.4f} {gapped_us(call, SAMPLES):.4f}",
              flush=True)
        if kernels and i == 0:
            kernel_table("the harness's call", lambda c=call: [c() for _ in range(PROFILED_CALLS)])
            short = short_run_file(line)
            kernel_table("conv_loop's code in this process (warm-up, calibration, loop, graph)",
                         lambda f=short: run_library(f))


def _in(stream, launch, times: int) -> None:
    """`times` launches with `stream` current."""
    import torch
    with torch.cuda.stream(stream):
        for _ in range(times):
            launch()


def graph_figures(out: str) -> list[float]:
    """conv_loop's graph figure (us per call) per input line, from its output lines."""
    return [float(ln.split()[-1]) if "error" not in ln else float("nan")
            for ln in out.splitlines() if ln and not ln.startswith(("#", "python", "captures"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lines", type=Path)
    ap.add_argument("--kernels", action="store_true", help="list each call's kernels (the first problem)")
    ap.add_argument("--captures", action="store_true",
                    help="time the harness's call in graphs captured and launched three ways (see above)")
    ap.add_argument("--buffers", action="store_true",
                    help="only the harness's call on torch's memory and values, on conv_loop's values, and on "
                         "cudaMalloc'd buffers with them, each beside conv_loop's code, in one process")
    ap.add_argument("--graphs", type=Path, metavar="DIR",
                    help="only the first problem's graphs as DOT files in DIR, then rounds of conv_loop's code and the "
                         "harness's call per problem, in one process without a profiler (see above)")
    ap.add_argument("--state", action="store_true",
                    help="only conv_loop's figures in a process of its own and after each step of what the harness's "
                         "process goes through (see above)")
    ap.add_argument("--child-state", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--steps", nargs="+", choices=STATE_STEPS + CUPTI_STEPS + TRIGGER_STEPS + CONTEXT_STEPS,
                    default=list(STATE_STEPS),
                    help="--state: these steps, in this order (default: STATE_STEPS)")
    ap.add_argument("--trigger", type=Path, metavar="FILE", help="--state: conv_loop lines for the trigger-N steps")
    ap.add_argument("--passes", action="store_true",
                    help="only conv_loop's code run several times in bare processes, per setting (see above)")
    ap.add_argument("--child-passes", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--settings", nargs="+", metavar="NAME=VALUE",
                    help="--passes: these environment settings (one process each; '' for none) instead of PASS_ENVS")
    ap.add_argument("--streams", action="store_true",
                    help="only the harness's call timed on the streams of STREAM_WAYS (or --ways), beside conv_loop")
    ap.add_argument("--child-streams", choices=STREAM_WAYS, help=argparse.SUPPRESS)
    ap.add_argument("--ways", nargs="+", choices=STREAM_WAYS, help="--streams: only these ways")
    ap.add_argument("--child", choices=LEVELS, help=argparse.SUPPRESS)
    ap.add_argument("--nvtx-calls", type=int, default=0, metavar="N",
                    help="only run the harness's call for the first problem N times in an NVTX range 'call' "
                         "(for a profiler: ncu --nvtx --nvtx-include call/)")
    args = ap.parse_args()
    if args.nvtx_calls:
        import torch
        prepare("backend")
        call = python_call(next(ln for ln in args.lines.read_text().splitlines() if ln.strip()))
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("call")
        for _ in range(args.nvtx_calls):
            call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        return 0
    questions = [(args.buffers, lambda: child_buffers(args.lines)),
                 (args.graphs, lambda: child_graphs(args.lines, args.graphs)),
                 (args.state, lambda: state_table(args.lines, args.steps, args.trigger)),
                 (args.child_state, lambda: child_state(args.lines, args.steps, args.trigger)),
                 (args.passes, lambda: passes_table(args.lines, args.settings or list(PASS_ENVS))),
                 (args.child_passes, lambda: child_passes(args.lines)),
                 (args.streams, lambda: streams_table(args.lines, args.ways or list(STREAM_WAYS))),
                 (args.child_streams, lambda: child_streams(args.child_streams, args.lines))]
    for asked, answer in questions:
        if asked:
            answer()
            return 0
    if args.child:
        child(args.child, args.lines, args.kernels, args.captures)
        return 0
    problems = [ln for ln in args.lines.read_text().splitlines() if ln.strip()]
    columns = {"exe": exe_figures(args.lines)}
    python: dict[int, tuple[float, float]] = {}
    for level in LEVELS:
        stdout = child_stdout(args.lines, "--child", level, *(["--kernels"] * args.kernels),
                              *(["--captures"] * args.captures))
        columns[level] = graph_figures(stdout)
        for ln in stdout.splitlines():
            if ln.startswith("captures"):
                print(f"{problems[int(ln.split()[1])][:60]:60} {ln}")
            elif ln.startswith("python"):
                _, i, quick, gapped = ln.split()
                python[int(i)] = (float(quick), float(gapped))
            elif ln.startswith("#"):
                print(ln)
    print(f"{'problem':70} " + " ".join(f"{c:>8}" for c in columns) + f" {'py-quick':>8} {'py-gapped':>9}"
          "  backend/exe py-gapped/backend")
    for i, line in enumerate(problems):
        figs = [col[i] if i < len(col) else float("nan") for col in columns.values()]
        quick, gapped = python.get(i, (float("nan"), float("nan")))
        print(f"{line[:70]:70} " + " ".join(f"{x:8.2f}" for x in figs) + f" {quick:8.2f} {gapped:9.2f}"
              f"  {figs[-1] / figs[0]:11.3f} {gapped / figs[-1]:15.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
