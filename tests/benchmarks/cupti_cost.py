"""What recording kernels with CUPTI costs, through torch.profiler (Kineto) and through CUPTI's
own activity API (cupti-python): per batch of samples as KernelTimes records them, on the GPU
while it records, and afterwards (what lingers once recording stopped).

Each client runs in a fresh process (CUPTI is process-wide) and measures, before any CUPTI use
and again after: an eager cuDNN LSTM backward (events), the host's time to launch an eager GEMM,
and graph replays of a 3 us GEMM (events). Between them it records BATCHES batches as KernelTimes
does (marker, events, replay per sample; the GPU kept busy after each batch) and times the host's
parts: starting the recording, stopping it, reading its records. A client's name ending in -N
records N samples of CALLS calls a batch (10 otherwise); "+TEARDOWN_CUPTI=1" sets Kineto's
variable, which detaches CUPTI after every recording. Each client's raw figures go to stderr
(for cupti-python also its flush and conversion times per batch).

    python tests/benchmarks/cupti_cost.py [CLIENT ...]   # on a GPU machine; default: all clients
Results: tests/benchmarks/results/cupti_cost-h100.log. Why cupti.py does what it does."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

CLIENTS = {"torch-profiler": {}, "torch-profiler+TEARDOWN_CUPTI=1": {"TEARDOWN_CUPTI": "1"},
           "cupti-python": {}}
for _n in (1, 5, 50):
    CLIENTS[f"torch-profiler-{_n}"] = {"SAMPLES_PER_BATCH": str(_n)}
    CLIENTS[f"torch-profiler+TEARDOWN_CUPTI=1-{_n}"] = {"TEARDOWN_CUPTI": "1", "SAMPLES_PER_BATCH": str(_n)}
BATCHES = 12
SAMPLES_PER_BATCH = int(os.environ.get("SAMPLES_PER_BATCH", 10))  # x CALLS kernels
CALLS = 200
PROBE_REPEATS = 7
LAUNCHES = 2000


def child(client: str) -> dict[str, Any]:
    import torch

    from deepbench.kernels.timing import cupti
    from deepbench.kernels.timing.events import enqueue_marked, us_per_call
    from deepbench.kernels.timing.graph import capture

    dev = torch.device("cuda")
    a = torch.randn(512, 512, device=dev, dtype=torch.float16)
    b = torch.randn(512, 16, device=dev, dtype=torch.float16)
    gemm = lambda: torch.mm(a, b)  # noqa: E731 - 512x16x512 fp16, ~3 us on an H100
    graph = capture(gemm, CALLS)
    lstm = torch.nn.LSTM(1024, 1024, num_layers=1).to(dev)
    x = torch.randn(50, 32, 1024, device=dev, requires_grad=True)

    def events_ms(fn: Callable[[], object]) -> float:
        out = []
        for _ in range(PROBE_REPEATS):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            s.record()
            fn()
            e.record()
            e.synchronize()
            out.append(s.elapsed_time(e))
        return statistics.median(out)

    def probes() -> dict[str, float]:
        y, _ = lstm(x)
        grad = torch.ones_like(y)
        bwd = events_ms(lambda: torch.autograd.grad(y, [x, *lstm.parameters()], grad, retain_graph=True))
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(LAUNCHES):
            gemm()
        host = (time.perf_counter() - t) / LAUNCHES * 1e6
        torch.cuda.synchronize()
        replay = events_ms(graph.replay) * 1e3 / CALLS
        return {"lstm_bwd_ms": bwd, "launch_host_us": host, "replay_us": replay}

    probes()  # first calls: cuDNN's plans, the allocator
    out: dict[str, Any] = {"client": client, "before": probes()}
    if client.startswith("cupti-python"):
        rec = ActivityClient()
        start_once, recording, device_events = rec.start_once, rec.recording, rec.device_events
    else:
        start_once, recording, device_events = cupti.start_once, cupti.recording, cupti.device_events
    t = time.perf_counter()
    start_once()
    out["first_start_s"] = time.perf_counter() - t
    rows = []
    for _ in range(BATCHES):
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(SAMPLES_PER_BATCH)]
        graph.replay()
        t0 = time.perf_counter()
        with recording() as prof:
            t1 = time.perf_counter()
            enqueue_marked(pairs, graph.replay)
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        for _ in range(20):
            graph.replay()
        events = device_events(prof)
        t4 = time.perf_counter()
        groups = cupti.split_at_markers(events)
        spans = [cupti.call_time_us(g, CALLS) for g in groups]
        rows.append({"start_s": t1 - t0, "stop_s": t3 - t2, "read_s": t4 - t3, "records": len(events),
                     "samples": len(groups), "span_us": statistics.median(spans) if spans else None,
                     "events_us": statistics.median(us_per_call(pairs, CALLS))})
    torch.cuda.synchronize()
    out["batches"] = rows
    out["after"] = probes()
    return out


class ActivityClient:
    """CUPTI's activity API through cupti-python: kernels, memsets and copies recorded only
    between enable and disable."""

    def __init__(self) -> None:
        from cupti import cupti as api

        self.api = api
        self.kinds = (api.ActivityKind.CONCURRENT_KERNEL, api.ActivityKind.MEMSET, api.ActivityKind.MEMCPY)
        self.done: list[Any] = []
        self.callback_s = 0.0
        api.activity_register_callbacks(lambda: (8 << 20, 0), self._completed)

    def _completed(self, activities: list[Any]) -> None:
        t = time.perf_counter()
        self.done.extend(activities)
        self.callback_s += time.perf_counter() - t

    def start_once(self) -> None:
        import torch

        with self.recording() as rec:
            torch.cuda._sleep(100)
        self.device_events(rec)

    @contextmanager
    def recording(self) -> Iterator[Any]:
        import torch

        for kind in self.kinds:
            self.api.activity_enable(kind)
        try:
            yield None
        finally:
            for kind in self.kinds:
                self.api.activity_disable(kind)
        self.end = torch.cuda.Event()
        self.end.record()

    def device_events(self, _: Any) -> list[tuple[float, float, str]]:
        self.end.synchronize()
        t0 = time.perf_counter()
        self.callback_s = 0.0
        self.api.activity_flush_all(1)
        t1 = time.perf_counter()
        records, self.done[:] = list(self.done), []
        out = sorted((r.start * 1e-3, r.end * 1e-3, getattr(r, "name", None) or "Memset/Memcpy") for r in records)
        print(json.dumps({"flush_s": t1 - t0, "callback_s": self.callback_s, "convert_s": time.perf_counter() - t1,
                          "records": len(records)}), file=sys.stderr)
        return out


def summary(out: dict[str, Any]) -> str:
    rows = out["batches"][2:]  # the first batches warm the allocator and the record buffers
    med = lambda key: statistics.median(r[key] for r in rows if r[key] is not None)  # noqa: E731
    before = out["before"]
    lines = [f"{out['client']}: first start {out['first_start_s']:.2f} s; per batch of "
             f"{med('records'):.0f} records: start {med('start_s') * 1e3:.1f} ms, stop {med('stop_s') * 1e3:.1f} ms, "
             f"read {med('read_s') * 1e3:.1f} ms; recorded replays: events {med('events_us'):.3f} us/call "
             f"(unrecorded {before['replay_us']:.3f}), spans {med('span_us'):.3f} us/call"]
    lines.append("  after: " + ", ".join(f"{k} {out['after'][k] / before[k]:.3f}x ({before[k]:.3f} -> "
                                         f"{out['after'][k]:.3f})" for k in before))
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2])))
        return
    chosen = sys.argv[1:] or list(CLIENTS)
    unknown = [c for c in chosen if c not in CLIENTS]
    if unknown:
        sys.exit(f"unknown client(s) {', '.join(unknown)}; choose from: {', '.join(CLIENTS)}")
    for client, env in ((c, CLIENTS[c]) for c in chosen):
        proc = subprocess.run([sys.executable, __file__, "--child", client], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=300)
        if proc.returncode:
            print(f"{client}: failed ({proc.returncode}): {proc.stderr[:2500]}")
            continue
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        print(summary(out))
        print(json.dumps(out), file=sys.stderr)
        print(proc.stderr[-3000:], file=sys.stderr)


if __name__ == "__main__":
    main()
