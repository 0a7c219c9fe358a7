"""Does the buffers' allocator move NCCL's bus bandwidth? PyTorch's caching allocator (cudaMalloc) beside
ncclMemAlloc (what nccl-tests allocates since NCCL 2.19), same calls, same communicator, side by side.

Each rank makes NCCL's own calls through nccl4py, captured 20 at a time in a CUDA graph and replayed
(nccl-tests' -G), timed by CUDA events after a barrier; the figure is the median of REPLAYS replays.
Sizes are nccl-tests' (the bytes of the larger buffer), and so are the bus-bandwidth factors.
One process per GPU, started by torchrun:

    NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node 2 tests/benchmarks/collective_buffers.py [--sizes 16M,256M,1G]

Rank 0 prints one line per collective and size: the time and busbw of each allocator and their ratio.
(The harness itself allocates with ncclMemAlloc where nccl4py loads: nccl4py_comm.py.)"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from deepbench.kernels.collective_kernels import COLLECTIVES_BY_OP, CollectiveKernel
from deepbench.kernels.costs import FLOAT32_BYTES
from deepbench.kernels.suites import COLLECTIVES_SET

CALLS_PER_GRAPH = 20
REPLAYS = 7
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}
# The collectives compared (the harness's names); their buffers and bus-bandwidth factors are the
# harness's kernels' (kernels/collective_kernels.py: nccl-tests' layouts and doc/PERFORMANCE.md)
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv")


def size_bytes(text: str) -> int:
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def kernel(op: str, size: int) -> CollectiveKernel:
    """The harness's kernel of `op` at nccl-tests' size `size` (bytes of the larger buffer)."""
    return COLLECTIVES_BY_OP[op](op=op, set=COLLECTIVES_SET, index=0, floats=size // FLOAT32_BYTES, repeat=1)


def allocate(nccl: Any, how: str, floats: int, device: torch.device) -> torch.Tensor:
    if how == "torch":
        return torch.zeros(floats, dtype=torch.float32, device=device)
    buf = torch.from_dlpack(nccl.mem_alloc(floats * FLOAT32_BYTES, device.index)).view(torch.float32)[:floats]
    return buf.zero_()


def calls(
    nccl: Any, op: str, comm: Any, send: torch.Tensor, recv: torch.Tensor, rank: int, n: int
) -> Callable[[], Any]:
    stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731 - the capturing stream inside a capture
    if op == "all_reduce":
        return lambda: comm.allreduce(send, recv, nccl.SUM, stream=stream())
    if op == "all_gather":
        return lambda: comm.allgather(send, recv, stream=stream())
    if op == "reduce_scatter":
        return lambda: comm.reduce_scatter(send, recv, nccl.SUM, stream=stream())
    if op == "all_to_all":
        return lambda: comm.alltoall(send, recv, stream=stream())

    def sendrecv() -> None:
        with nccl.group():
            comm.send(send, (rank + 1) % n, stream=stream())
            comm.recv(recv, (rank - 1) % n, stream=stream())

    return sendrecv


def timed(fn: Callable[[], None], device: torch.device) -> float:
    """Median seconds per call of graph replays."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # NCCL's per-stream set-up, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    torch.cuda.synchronize()
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        with torch.cuda.stream(stream):
            start.record(stream)
            graph.replay()
            end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / CALLS_PER_GRAPH)
    del graph
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="16M,256M,1G", help="nccl-tests' sizes (bytes; K, M, G suffixes)")
    parser.add_argument("--ops", default=",".join(OPS), help=f"of: {', '.join(OPS)}")
    args = parser.parse_args()
    import nccl.core as nccl  # nccl4py: only where the script runs, so that --help needs no GPU stack

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("gloo")
    uid = [nccl.get_unique_id().as_bytes if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    comm = nccl.Communicator.init(n, rank, nccl.UniqueId.from_bytes(uid[0]))
    if rank == 0:
        print(f"{n} ranks, {torch.cuda.get_device_name(device)}, NCCL {nccl.get_version().libnccl.version}")
        head = f"{'collective':>14} {'size (B)':>13} | {'torch us':>9} {'busbw':>6} | {'ncclMemAlloc us':>15}"
        print(f"{head} {'busbw':>6} | torch/nccl time")
    for op in args.ops.split(","):
        for size in map(size_bytes, args.sizes.split(",")):
            collective = kernel(op, size)
            layout = collective.layout(n)
            row = {}
            for how in ("torch", "nccl"):
                send, recv = allocate(nccl, how, layout.send, device), allocate(nccl, how, layout.recv, device)
                row[how] = timed(calls(nccl, op, comm, send, recv, rank, n), device)
                del send, recv
                torch.cuda.synchronize()
            if rank == 0:
                bus = {h: layout.bytes / t * collective.bus_factor(n) / 1e9 for h, t in row.items()}
                print(
                    f"{op:>14} {layout.bytes:>13,} | {row['torch'] * 1e6:>9.1f} {bus['torch']:>6.0f} | "
                    f"{row['nccl'] * 1e6:>15.1f} {bus['nccl']:>6.0f} | {row['torch'] / row['nccl']:.3f}",
                    flush=True,
                )
    comm.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
