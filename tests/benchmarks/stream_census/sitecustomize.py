"""Which CUDA streams carry a harness run's GPU work: a census taken by CUPTI (through torch.profiler) over
the whole life of the harness's worker process, from before its first CUDA call to its exit.

Why: conv_loop's figures for 20-45 us fp16 convolutions stay at a fresh process's while every pass reuses one
stream, and read 2.5-7% slower once a pass runs on a new stream after another stream carried work
(tests/benchmarks/results/conv-process-probe-h100/). The harness puts its own work on one stream
(kernels/timing/work_stream.py) yet still reads ~3% over conv_loop; this lists every stream that carried
anything, with what it carried first, so the one that should not be there can be named.

Use: PYTHONPATH=tests/benchmarks/stream_census:$PYTHONPATH DEEPBENCH_STREAM_CENSUS=OUT.json deepbench-run --local
--no-kernel-time ...  (the harness's own kernel-time recordings would nest in this one; `--no-kernel-time` keeps
them out). Only the harness's worker (`-m deepbench.kernels.harness`) is recorded. Writes OUT.json and prints a
table on stderr at exit."""

import atexit
import json
import os
import sys

_OUT = os.environ.get("DEEPBENCH_STREAM_CENSUS")

if _OUT and "deepbench.kernels.harness" in sys.orig_argv:
    from torch.profiler import ProfilerActivity, profile

    _prof = profile(activities=[ProfilerActivity.CUDA])
    _prof.start()

    def _write() -> None:
        from torch.autograd import DeviceType

        _prof.stop()
        events = sorted((e for e in _prof.profiler.kineto_results.events() if e.device_type() == DeviceType.CUDA),
                        key=lambda e: e.start_ns())
        t0 = events[0].start_ns() if events else 0
        streams: dict[int, dict] = {}
        for e in events:
            s = streams.setdefault(e.device_resource_id(), {"events": 0, "busy_us": 0.0, "last_s": 0.0,
                                                          "first_s": (e.start_ns() - t0) / 1e9, "first_names": []})
            s["events"] += 1
            s["busy_us"] += e.duration_ns() / 1e3
            s["last_s"] = (e.start_ns() - t0) / 1e9
            if len(s["first_names"]) < 6 and e.name()[:100] not in s["first_names"]:
                s["first_names"].append(e.name()[:100])
        with open(_OUT, "w") as f:
            json.dump({"events": len(events), "streams": streams}, f, indent=1)
        print(f"# stream census: {len(events)} GPU activities on {len(streams)} streams", file=sys.stderr)
        for sid, s in sorted(streams.items(), key=lambda kv: kv[1]["first_s"]):
            print(f"# stream {sid}: {s['events']} activities, {s['busy_us'] / 1e3:.1f} ms busy, "
                  f"{s['first_s']:.3f}-{s['last_s']:.3f} s; first: {s['first_names']}", file=sys.stderr)

    atexit.register(_write)
