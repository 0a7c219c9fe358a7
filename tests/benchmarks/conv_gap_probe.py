"""Why does the harness time some short fp16 convolutions a few percent slower than conv_loop on
the very same cuDNN plan? (A diagnosis script for issue 20: needs an NVIDIA GPU, the cuDNN
backend's bindings and build/native/conv_loop.)

For each convolution direction of a results folder (filtered by --only), the recorded plan (by
its name) is built once and its call timed here, each figure a median of --samples samples of a
CUDA graph of calls lasting about 2 ms, in four ways:
  harness    the harness's own quick timer (timing.graph_events.quick_us: replays back to back),
             its tensors from PyTorch's caching allocator, as the backend allocates them;
  aligned    the same, every tensor and the workspace at a 2 MiB boundary, as cudaMalloc gives
             conv_loop its buffers;
  gapped     harness tensors, but each replay between two events and waited for before the next
             (conv_loop's graph timing: the GPU idles between samples);
  conv_loop  the native loop on the same problem and plan, in a subprocess, right after.
It prints one line per direction with the four figures and each over conv_loop's graph figure.

    python tests/benchmarks/conv_gap_probe.py RESULTS_DIR --only 'conv/inference_server/02*'
"""

from __future__ import annotations

import argparse
import fnmatch
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from deepbench.kernels.backends import load_backend
from deepbench.kernels.backends.cudnn import conv, graphs
from deepbench.kernels.backends.pytorch.conv import padded_conv
from deepbench.kernels.results import RESULTS_FILE, Settings, Status
from deepbench.kernels.results_file import read_results
from deepbench.kernels.timing.events import calls_for, time_eager
from deepbench.kernels.timing.graph import capture
from deepbench.kernels.timing.graph_events import quick_us

ALIGN = 2 << 20           # cudaMalloc hands large buffers out at 2 MiB boundaries
SAMPLE_S = 0.002          # conv_loop's MIN_TRIAL_MS
LOOP = Path(__file__).resolve().parents[2] / "build" / "native" / "conv_loop"


def aligned_like(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` (same shape and strides) whose storage starts at an ALIGN boundary."""
    nbytes = t.untyped_storage().nbytes()
    raw = torch.empty(nbytes + ALIGN, dtype=torch.uint8, device=t.device)
    start = (-raw.data_ptr()) % ALIGN
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(raw.untyped_storage(), start // t.element_size(), t.size(), t.stride())
    out.copy_(t)
    assert out.data_ptr() % ALIGN == 0
    return out


def gapped_us(fn, samples: int) -> float:
    """conv_loop's graph timing: one replay per sample, between two events, waited for."""
    calls = calls_for(time_eager(fn, 2), SAMPLE_S, 4000)
    graph = capture(fn, calls)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(samples + 1):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(out[1:])


def native_us(line: str) -> tuple[float, float]:
    """conv_loop's host-loop and graph figures for one input line."""
    out = subprocess.run([str(LOOP)], input=line + "\n", capture_output=True, text=True, timeout=120).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--only", default="conv/*")
    ap.add_argument("--samples", type=int, default=30)
    args = ap.parse_args()
    backend = load_backend("cudnn", Settings(device="cuda", warm_up_s=0.0))
    cudnn, handle = backend.lib, backend.handle
    print(f"{'id':34} {'dir':10} {'harness':>8} {'aligned':>8} {'gapped':>8} {'loop':>8} {'host':>8}  "
          "harness/loop aligned/loop gapped/loop  plan")
    for r in read_results(args.folder / RESULTS_FILE):
        if r.op != "conv" or r.status is not Status.OK or not fnmatch.fnmatch(r.id, args.only):
            continue
        precision = r.precision.name
        kk, _ = padded_conv(r.kernel, precision, backend.ctx.pad)
        dtype = graphs.TORCH_DTYPES[precision]
        data = {"x": torch.randn(kk.n, kk.c, kk.h, kk.w, device="cuda").to(dtype),
                "w": (torch.randn(kk.k, kk.c, kk.r, kk.s, device="cuda") * (kk.c * kk.r * kk.s) ** -0.5).to(dtype),
                "dy": torch.randn(kk.n, kk.k, kk.out_h, kk.out_w, device="cuda").to(dtype)}
        outs = {"fwd": data["dy"], "bwd_data": data["x"], "bwd_filter": data["w"]}
        for part in r.parts:
            d, plan = part.direction, part.info["cudnn"]["plan_name"]
            g, roles = graphs.build(cudnn, handle.handle, kk, precision, d)
            e = conv._named_plan(cudnn, g, plan)
            figures = []
            for variant in ("harness", "aligned"):
                tensors = {k: (aligned_like(t) if variant == "aligned" else t.clone()) for k, t in data.items()}
                out = torch.empty_like(outs[d])
                out = aligned_like(out) if variant == "aligned" else out
                pack = {roles[role]: tensors[role] for role in conv.INPUT_ROLES[d]}
                pack[roles[conv.OUTPUT_ROLE[d]]] = out
                ws = torch.empty(max(e.workspace, 1), dtype=torch.uint8, device="cuda")
                ws = aligned_like(ws) if variant == "aligned" else ws

                def run(pack=pack, ws=ws, g=g, index=e.index) -> None:
                    g.execute_plan_at_index(pack, ws, index, handle=handle.bind())
                figures.append(quick_us(run, min_sample_s=SAMPLE_S, samples=args.samples))
                if variant == "harness":
                    gapped = gapped_us(run, args.samples)
            torch.cuda.synchronize()
            shape = (f"{kk.n} {kk.c} {kk.h} {kk.w} {kk.k} {kk.r} {kk.s} {kk.pad_h} {kk.pad_w} "
                     f"{kk.stride_h} {kk.stride_w}")
            host, loop = native_us(f"{precision.value} {d} {shape} {plan} 0.2")
            h, a = figures
            print(f"{r.id:34} {d:10} {h:8.2f} {a:8.2f} {gapped:8.2f} {loop:8.2f} {host:8.2f}  "
                  f"{h / loop:12.3f} {a / loop:12.3f} {gapped / loop:11.3f}  {plan}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
