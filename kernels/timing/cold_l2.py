"""Cold measurement (METHOD_COLD, --cold): before every call a buffer FLUSH_FACTOR times the L2's
size is written, so the call finds none of its operands in L2 (triton.testing.do_bench's flush).
Each call is timed by its own event pair, which adds an event pair's cost to every sample: cold
figures suit large kernels."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .eager import host_launch_notes
from .events import MS_TO_US, event_pair
from .sampler import Sampler, no_probe

METHOD_COLD = "cuda-events-cold"
COLD_CALLS_PER_SYNC = 16  # event pairs recorded before one host synchronisation
FLUSH_FACTOR = 2  # flush buffer = this x L2 size
L2_GUESS_BYTES = 64 << 20  # where the device does not say its L2 size
FLOAT32_BYTES = 4


def cold_sampler(fn: Callable[[], object], device: torch.device, during: Callable[[], None] = no_probe) -> Sampler:
    """One call per sample, each after writing a buffer larger than L2."""
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or L2_GUESS_BYTES)
    flush = torch.empty(FLUSH_FACTOR * l2 // FLOAT32_BYTES, dtype=torch.float32, device=device)
    pending: list[float] = []

    def take() -> float:
        if not pending:
            pairs = [event_pair() for _ in range(COLD_CALLS_PER_SYNC)]
            for start, end in pairs:
                flush.fill_(1.0)
                start.record()
                fn()
                end.record()
            during()
            pairs[-1][1].synchronize()
            pending.extend(s.elapsed_time(e) * MS_TO_US for s, e in pairs)
        return pending.pop(0)

    fn()
    return Sampler(
        METHOD_COLD,
        1,
        take,
        1,
        {"flush_bytes": flush.numel() * FLOAT32_BYTES, **host_launch_notes()},
        replay=fn,
        replay_calls=1,
        before_replay=lambda: flush.fill_(1.0),
    )
