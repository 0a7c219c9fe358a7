"""All-reduce on any communication library: data, exact checks, rank-synchronised timing.

A library module (torch_dist.py, mpi.py) provides a `Communicator`: buffers on its device, the
in-place and out-of-place sum-all-reduce, and small host-side control messages (barrier,
allgather of a few numbers). Everything else is here, so that every library is measured and
checked the same way, following nccl-tests:
- time per call of each rank, then the mean and the max over ranks; algorithm bandwidth
  algbw = S / t and bus bandwidth busbw = algbw * 2(n-1)/n (kernels/costs.py), S = floats * 4;
- in place (the result overwrites the input) and out of place (input and output apart);
- a warm-up over all of DeepBench's sizes before the first measurement;
- data whose sum is exact (small positive integers in float32), checked exactly on every rank;
  one wrong element on one rank fails the kernel on all of them.

Every rank must make the same calls in the same order or the collective hangs, so each decision
(how many calls per sample, when to stop) is taken from numbers all ranks exchanged: they all
reach the same one."""

from __future__ import annotations

import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import costs, faults
from ...catalog import AllReduceKernel, Kernel, catalog
from ...precision import Precision
from ...results import Check, Measurement, PartResult, Settings
from ...timing.sampling import Step, sample_until
from ...timing.stopping import REPEAT_COUNT, CallBudget, Progress, Stop, StopRule
from ..base import Backend, Prepared, TimedPart, Unsupported

METHOD = "collective-host-clock"
CHECK_METHOD = "exact-sum"
# Values on each rank are integers in [1, VALUE_MAX]: sums of up to 2**24 / VALUE_MAX ranks are
# exact in float32, and they are never zeros or constants.
VALUE_MAX = 8
MAX_EXACT_RANKS = 2**24 // VALUE_MAX
MAX_CALLS_PER_SAMPLE = 1 << 16
US_PER_S = 1e6
IN_PLACE, OUT_OF_PLACE = "in_place", "out_of_place"


class CheckFailed(Exception):
    """A rank holds a wrong element after the all-reduce: the kernel fails with this reason."""


class Communicator(ABC):
    """One library's view of the ranks. Buffers are whatever the library reduces (numpy arrays
    on a host, torch tensors on a device); the helpers convert for checking."""

    rank: int = 0
    size: int = 1
    library: str = ""
    out_of_place_note: str = ""
    # Set when a collective raised (a rank died or timed out): the group cannot be used again, and
    # the harness restarts every rank (harness __main__, runner/launch/supervise.py).
    broken: str = ""

    def guarded(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            broke = f"{self.library} communicator failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
            missing = self.missing_ranks()
            self.broken = f"{missing}; {broke}" if missing else broke
            if missing:
                raise RuntimeError(self.broken) from exc
            raise

    def missing_ranks(self) -> str:
        """After a collective broke: which ranks (on which hosts) are gone, where the library
        can tell ('' where it cannot, or on ranks other than 0)."""
        return ""

    @abstractmethod
    def buffer(self, values: np.ndarray) -> Any:
        """A float32 buffer on this library's device holding `values`."""

    @abstractmethod
    def empty(self, floats: int) -> Any: ...

    @abstractmethod
    def all_reduce_in_place(self, buf: Any) -> None: ...

    @abstractmethod
    def all_reduce(self, send: Any, recv: Any) -> None:
        """Out of place: recv = sum over ranks of send."""

    @abstractmethod
    def copy(self, dst: Any, src: Any) -> None: ...

    @abstractmethod
    def to_host(self, buf: Any) -> np.ndarray: ...

    @abstractmethod
    def synchronize(self) -> None:
        """Wait until the calls issued so far are complete (a device stream), for the timer."""

    @abstractmethod
    def barrier(self) -> None: ...

    @abstractmethod
    def allgather(self, values: list[float]) -> list[list[float]]:
        """Every rank's `values`, in rank order, on every rank (host-side control traffic)."""

    def versions(self) -> dict[str, str]:
        """The library's versions and how the ranks were started, for the results (each library's
        communicator says; a test's fake one, which records no results, need not)."""
        raise NotImplementedError

    def equal(self, buf: Any, expected: np.ndarray) -> tuple[int, int]:
        """(number of wrong elements, first wrong index or -1)."""
        got = self.to_host(buf)
        bad = np.flatnonzero(got != expected)
        return int(bad.size), int(bad[0]) if bad.size else -1


def check_world(size: int, settings: Settings, started_by: str) -> None:
    """The ranks that met must be the ranks the plan asked for: an engine whose ranks did not reach
    the library (an MPI that does not speak srun's PMI starts every rank as a world of one, and
    each would write the run's results as rank 0) or a wrong task count is said here, not measured."""
    if settings.ranks > 1 and size != settings.ranks:
        raise RuntimeError(f"the plan asks for {settings.ranks} ranks, and {started_by} put {size} in this rank's "
                           "group: start exactly the plan's ranks (for MPI under srun, a --mpi= plugin the MPI "
                           "speaks: deepbench launch-command checks which)")


def rank_values(floats: int, rank: int, seed: int) -> np.ndarray:
    """Random integers 1..VALUE_MAX as float32, different on every rank and every seed."""
    rng = np.random.default_rng([seed, rank, floats])
    return rng.integers(1, VALUE_MAX + 1, size=floats, dtype=np.int8).astype(np.float32)


def expected_sum(floats: int, size: int, seed: int) -> np.ndarray:
    """What every rank must hold after the all-reduce: exact (integers well below 2**24)."""
    total = np.zeros(floats, dtype=np.float32)
    for r in range(size):
        total += rank_values(floats, r, seed)
    return total


def all_reduce_sizes() -> list[int]:
    """DeepBench's message sizes (floats), for the warm-up over all sizes."""
    return sorted({k.floats for k in catalog() if isinstance(k, AllReduceKernel)})


class AllReduceRunner:
    """Prepares and measures DeepBench's all-reduce kernels on one communicator."""

    def __init__(self, comm: Communicator, settings: Settings) -> None:
        self.comm = comm
        self.settings = settings
        self.warmed_up = False

    # ----- preparation ------------------------------------------------------------------
    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if not isinstance(kernel, AllReduceKernel):
            raise Unsupported(f"{kernel.op} is not a collective: the {self.comm.library} backend runs all-reduce "
                              "only (use the torch backend for it)")
        if precision is not Precision.FP32:
            raise Unsupported("DeepBench's all-reduce is defined on float32 elements")
        if self.comm.size > MAX_EXACT_RANKS:
            raise Unsupported(f"more than {MAX_EXACT_RANKS} ranks: the check's sums would not be exact in float32")
        if not self.warmed_up:
            self.warm_up()
        comm, floats, seed = self.comm, kernel.floats, self.settings.seed
        try:
            mine = rank_values(floats, comm.rank, seed)
            expected = expected_sum(floats, comm.size, seed)
            pristine = comm.buffer(mine)
            work = comm.buffer(mine)
            recv = comm.empty(floats)
            problem = ""
        except Exception as exc:  # noqa: BLE001 - the other ranks must hear of it, or they wait forever
            problem = f"{type(exc).__name__}: {exc}"
        failed = [r for r, (ok,) in enumerate(comm.allgather([0.0 if problem else 1.0])) if not ok]
        if failed:
            raise RuntimeError(f"rank(s) {', '.join(map(str, failed))} could not allocate the buffers"
                               + (f": {problem}" if problem else " (see their records under ranks/)"))
        corrupt = faults.requested("wrong", kernel.id, comm.rank)
        nbytes = costs.all_reduce_bytes(floats)
        max_calls = kernel.repeat

        def run_in_place() -> None:
            comm.all_reduce_in_place(work)

        def check_in_place() -> Check:
            # The timed calls reduced the same buffer again and again (values grow by n each call,
            # as in nccl-tests); the check restores the inputs and checks one call exactly.
            comm.copy(work, pristine)
            comm.all_reduce_in_place(work)
            comm.synchronize()
            return self.agreed_check(work, expected, corrupt)

        def run_out_of_place() -> None:
            comm.all_reduce(pristine, recv)

        def check_out_of_place() -> Check:
            comm.synchronize()
            return self.agreed_check(recv, expected, corrupt)

        def part(direction: str, run: Callable[[], None], check: Callable[[], Check], note: str) -> TimedPart:
            info: dict[str, Any] = {"ranks": comm.size, "bytes": nbytes}
            if note:
                info["note"] = note
            return TimedPart(direction=direction, run=run, check=check, flops=0.0, min_bytes=nbytes, info=info,
                             capturable=False, timer=lambda fn, rule: self.measure(fn, rule, max_calls, info))

        in_place = part(IN_PLACE, run_in_place, check_in_place, "")
        out_of_place = part(OUT_OF_PLACE, run_out_of_place, check_out_of_place, comm.out_of_place_note)

        def after(backend: Any, rule: StopRule) -> dict[str, Any]:
            # The kernel's time is the in-place time (a sum of the two would mean nothing), so the
            # out-of-place call is measured here, the same way, and kept beside it in info.
            return {OUT_OF_PLACE: self.measure_part(out_of_place, rule)}

        info = {"ranks": comm.size, "library": comm.library, "bytes": nbytes,
                "time_is": "the in_place part; the out_of_place measurement is in info.out_of_place"}
        return Prepared(parts=[in_place], info=info, after=after)

    def measure_part(self, part: TimedPart, rule: StopRule) -> dict[str, Any]:
        """Time and check one part (warm already: the sizes' warm-up and the calibration's first
        calls); a wrong element on any rank fails the kernel."""
        assert part.timer is not None
        measurement = part.timer(part.run, rule)
        check = part.check()
        if not check.passed:
            raise CheckFailed(f"{part.direction}: check failed ({check.method}): {check.detail}")
        result = PartResult(direction=part.direction, measurement=measurement, flops=0.0, min_bytes=part.min_bytes,
                            check=check, gbps=part.info["algbw_gbps"], info=part.info)
        return result.model_dump(mode="json")

    def warm_up(self) -> None:
        """One all-reduce of every DeepBench size before anything is timed (connections,
        buffers and algorithm choices of the library are set up here, not in a measurement)."""
        for floats in all_reduce_sizes():
            buf = self.comm.buffer(rank_values(floats, self.comm.rank, self.settings.seed))
            self.comm.all_reduce_in_place(buf)
            self.comm.synchronize()
            del buf
        self.comm.barrier()
        self.warmed_up = True

    # ----- checking ---------------------------------------------------------------------
    def agreed_check(self, buf: Any, expected: np.ndarray, corrupt: bool) -> Check:
        """Exact comparison on this rank, then every rank learns every rank's outcome."""
        wrong, first = self.comm.equal(buf, expected)
        if corrupt:  # fault injection for tests: one rank sees one wrong element
            wrong, first = max(wrong, 1), 0 if first < 0 else first
        outcomes = self.comm.allgather([float(wrong), float(first)])
        bad = [(r, int(w), int(f)) for r, (w, f) in enumerate(outcomes) if w > 0]
        floats = expected.size
        detail = "; ".join(f"rank {r}: {w} of {floats} elements differ from the exact sum (first at {f})"
                           for r, w, f in bad)
        error = max(w for _, w, _ in bad) / floats if bad else 0.0
        return Check(passed=not bad, method=CHECK_METHOD, error=error, tolerance=0.0,
                     detail=detail or f"all {self.comm.size} ranks hold the exact sum")

    # ----- timing -----------------------------------------------------------------------
    def _timed(self, fn: Callable[[], object], calls: int) -> float:
        """Seconds for `calls` back-to-back calls on this rank, started together with the others."""
        self.comm.synchronize()
        self.comm.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        self.comm.synchronize()
        return time.perf_counter() - t0

    def measure(self, fn: Callable[[], object], rule: StopRule, max_calls: int, info: dict[str, Any]) -> Measurement:
        """Rank-synchronised samples: each sample is `calls` back-to-back calls on every rank;
        the sample's time is the slowest rank's time per call (a collective is done when its
        last rank is). Total timed calls stay within DeepBench's repeat count for the size."""
        start = time.perf_counter()
        calls, warmup, last = self._calibrate(fn, max_calls)
        source = _RankSamples(self, fn, calls, last, start)
        budget = (Stop(REPEAT_COUNT, CallBudget(max_calls, calls)),)
        reason = sample_until(source, rule.criteria, budget)
        samples = source.samples
        means = [statistics.fmean(ts) for ts in source.per_rank]
        median = statistics.median(samples)
        algbw = info["bytes"] / (median / US_PER_S) / 1e9  # nccl-tests: S / t
        info.update({
            "time_per_rank_us": [round(m, 3) for m in means],
            "time_mean_over_ranks_us": statistics.fmean(means),
            "time_max_over_ranks_us": max(means),
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * costs.bus_bandwidth_factor(self.comm.size),
            "timed_calls": len(samples) * calls,
            "repeat_cap": max_calls,
        })
        # The calibration's last loop had the final call count: it is the first sample, not warm-up.
        return Measurement.of(samples, method=METHOD, calls_per_sample=calls, warmup_calls=warmup - calls,
                              stop_reason=reason, target_rel_precision=rule.target_rel_precision)

    def _calibrate(self, fn: Callable[[], object], max_calls: int) -> tuple[int, int, float]:
        """Calls per sample so that the slowest rank's sample lasts `min_sample_s`; the same
        number on every rank, since all decide from the gathered times. Returns (calls, calls
        made, this rank's seconds for the last loop, which had `calls` calls: the first sample)."""
        calls, made = 1, 0
        limit = max(1, min(MAX_CALLS_PER_SAMPLE, max_calls // max(1, self.settings.min_samples)))
        while True:
            mine = self._timed(fn, calls)
            elapsed = max(e for (e,) in self.comm.allgather([mine]))
            made += calls
            if elapsed >= self.settings.min_sample_s or calls >= limit:
                return calls, made, mine
            calls = min(limit, max(2 * calls, int(calls * self.settings.min_sample_s / max(elapsed, 1e-9)) + 1))


class _RankSamples:
    """The collective's side of the shared sampling loop: every rank times `calls` calls, all
    exchange their times, and the sample is the slowest rank's. The criteria judge rank 0's
    clock, so every rank stops alike."""

    def __init__(self, runner: AllReduceRunner, fn: Callable[[], object], calls: int, first_s: float,
                 start: float) -> None:
        self.runner, self.fn, self.calls, self.start = runner, fn, calls, start
        self.first_s: float | None = first_s  # the calibration's last loop: this rank's first sample
        self.per_rank: list[list[float]] = [[] for _ in range(runner.comm.size)]
        self.samples: list[float] = []

    def take(self) -> Step:
        if self.first_s is not None:
            seconds, self.first_s = self.first_s, None
        else:
            seconds = self.runner._timed(self.fn, self.calls)
        mine = seconds / self.calls * US_PER_S
        gathered = self.runner.comm.allgather([mine, time.perf_counter() - self.start])
        for r, (t, _) in enumerate(gathered):
            self.per_rank[r].append(t)
        self.samples.append(max(t for t, _ in gathered))
        progress = Progress(self.samples, gathered[0][1])  # rank 0's clock: every rank decides alike
        return Step(progress, progress)

    def pause(self) -> None:
        """Ranks start each sample together at the next sample's barrier."""


class CollectiveBackend(Backend):
    """What every all-reduce backend shares: its communicator and runner, the rank-synchronised
    timer each part brings, library versions, and the barrier before each kernel."""

    ranked = True  # rank: set from the communicator by each library's backend
    comm: Communicator
    runner: AllReduceRunner

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        return self.runner.prepare(kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        assert part.timer is not None, "every all-reduce part brings its rank-synchronised timer"
        return part.timer(fn, rule)

    def library_versions(self) -> dict[str, str]:
        return self.comm.versions()

    def item_barrier(self) -> None:
        """All ranks start each kernel together (harness __main__)."""
        self.comm.barrier()
