"""Collectives on any communication library: data, exact checks, rank-synchronised timing.

A library module (torch_dist.py, mpi.py, nccl4py_comm.py) provides a `Communicator`: buffers on its
device, the collectives in place and out of place, and small host-side control messages (barrier,
allgather of a few numbers). What goes in and must come out of each collective is problems.py;
everything else is here, so that every library is measured and checked the same way, following
nccl-tests:
- time per call of each rank, then the mean and the max over ranks; algorithm bandwidth
  algbw = S / t and bus bandwidth busbw = algbw * the collective's factor (kernels/collective_kernels.py),
  S = nccl-tests' size of the kernel on these ranks;
- in place (the output buffer holds the input) and out of place (input and output apart), where
  the collective has both;
- a warm-up of the collective over all of DeepBench's all-reduce sizes before its first measurement;
- data whose sums are exact (small positive integers in float32), checked exactly on every rank;
  one wrong element on one rank fails the kernel on all of them;
- on CUDA, the timed calls captured in a CUDA graph per rank and replayed together, timed by
  events (nccl-tests' -G; --collective-timing graph, declaration.py), or launched one by one from Python
  and timed by the host clock ("eager"); the record's method says which.

Every rank must make the same calls in the same order or the collective hangs, so each decision
(how many calls per sample, when to stop) is taken from numbers all ranks exchanged: they all
reach the same one."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import faults
from ...catalog import AllReduceKernel, Kernel, catalog
from ...collective_kernels import CollectiveKernel, Layout
from ...precision import Precision
from ...results import Check, Measurement, PartResult, Settings
from ...timing.sampling import Step, sample_until
from ...timing.stopping import REPEAT_COUNT, CallBudget, Progress, Stop, StopRule
from ..contract.base import Backend, Prepared, TimedPart, Unsupported
from .declaration import COLLECTIVES, MAX_EXACT_RANKS, collective_figures
from .problems import Problem, problem

METHOD = "collective-host-clock"
CHECK_METHOD = "exact-sum"
MAX_CALLS_PER_SAMPLE = 1 << 16
US_PER_S = 1e6
IN_PLACE, OUT_OF_PLACE = "in_place", "out_of_place"


class CheckFailed(Exception):
    """A rank holds a wrong element after the collective: the kernel fails with this reason."""


class Communicator(ABC):
    """One library's view of the ranks. Buffers are whatever the library reduces (numpy arrays
    on a host, torch tensors on a device); the helpers convert for checking."""

    rank: int = 0
    size: int = 1
    library: str = ""
    # Where the device buffers come from, for the record ('' for host memory): NCCL moves
    # ncclMemAlloc'd memory faster than cudaMalloc'd (nccl4py_comm.py says why).
    buffers: str = ""
    # The library's communicator configuration, for the record ('' where there is nothing to say).
    comm_config: str = ""
    # Set when a collective raised (a rank died or timed out): the group cannot be used again, and
    # the harness restarts every rank (harness __main__, runner/launch/running/supervise.py).
    broken: str = ""

    def guarded(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
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
    def all_reduce_in_place(self, buf: Any) -> Any:
        """buf = sum over ranks of buf; returns buf."""

    @abstractmethod
    def all_reduce(self, send: Any, recv: Any) -> Any:
        """Out of place: recv = sum over ranks of send; returns recv."""

    # The other collectives (problems.py says what goes in and out). A library that lacks one
    # says so: the kernel is unsupported there, with that reason.
    def all_gather(self, send: Any, recv: Any) -> Any:
        """recv = every rank's send, in rank order."""
        raise self.lacks("all_gather")

    def all_gather_in_place(self, buf: Any, count: int) -> Any:
        """As all_gather, with this rank's input already at buf[rank * count:]."""
        raise self.lacks("all_gather")

    def reduce_scatter(self, send: Any, recv: Any) -> Any:
        """recv = share `rank` (recv's size) of the sum over ranks of send."""
        raise self.lacks("reduce_scatter")

    def reduce_scatter_in_place(self, buf: Any, count: int) -> Any:
        """As reduce_scatter with buf as input; returns the view of buf holding this rank's share."""
        raise self.lacks("reduce_scatter")

    def broadcast(self, send: Any, recv: Any, root: int) -> Any:
        raise self.lacks("broadcast")

    def broadcast_in_place(self, buf: Any, root: int) -> Any:
        raise self.lacks("broadcast")

    def reduce(self, send: Any, recv: Any, root: int) -> Any:
        """recv on `root` = sum over ranks of send (other ranks' recv undefined)."""
        raise self.lacks("reduce")

    def reduce_in_place(self, buf: Any, root: int) -> Any:
        raise self.lacks("reduce")

    def all_to_all(self, send: Any, recv: Any) -> Any:
        """Share j of send goes to rank j; recv holds share `rank` of every rank's send."""
        raise self.lacks("all_to_all")

    def send_recv(self, send: Any, recv: Any, to: int, source: int) -> Any:
        """send goes to rank `to` while recv receives from rank `source`, at once."""
        raise self.lacks("sendrecv")

    def lacks(self, op: str) -> Unsupported:
        return Unsupported(f"the {self.library} communicator has no {op}")

    def out_of_place_note(self, op: str) -> str:
        """How this library's out-of-place call differs from NCCL's ('' where it does not)."""
        return ""

    def graph_timer(self) -> Any:
        """A timer of CUDA graph replays for this communicator's device (graph_timing.py), or None
        where the calls cannot be captured (host buffers, a library that cannot)."""
        return None

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
        raise RuntimeError(
            f"the plan asks for {settings.ranks} ranks, and {started_by} put {size} in this rank's "
            "group: start exactly the plan's ranks (for MPI under srun, a --mpi= plugin the MPI "
            "speaks: deepbench launch-command checks which)"
        )


def all_reduce_sizes() -> list[int]:
    """DeepBench's message sizes (floats), for the warm-up over all sizes."""
    return sorted({k.floats for k in catalog() if isinstance(k, AllReduceKernel)})


class CollectiveRunner:
    """Prepares and measures collective kernels on one communicator."""

    def __init__(self, comm: Communicator, settings: Settings) -> None:
        self.comm = comm
        self.settings = settings
        self.warmed_up: set[str] = set()  # the collectives already warmed up
        timing = COLLECTIVES.options_of(settings).collective_timing
        self.graphs = comm.graph_timer() if timing == "graph" else None
        self._line: Any = None  # the start line's one float (graph_timing.py says why)

    @property
    def method(self) -> str:
        """How the timed calls are launched and timed, for the record."""
        return self.graphs.method if self.graphs is not None else METHOD

    @property
    def timing(self) -> str:
        """graph or eager: what this runner does (host buffers are always eager)."""
        return "graph" if self.graphs is not None else "eager"

    # ----- preparation ------------------------------------------------------------------
    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        if not isinstance(kernel, CollectiveKernel):
            raise Unsupported(
                f"{kernel.op} is not a collective: the {self.comm.library} backend runs collectives "
                "only (use the torch backend for it)"
            )
        layout = self._layout(kernel, precision)
        if kernel.op not in self.warmed_up:
            self.warm_up(kernel)
        comm, factor = self.comm, kernel.bus_factor(self.comm.size)
        job, send, recv, pristine, work = self._buffers(kernel, layout)
        corrupt = faults.requested("wrong", kernel.id, comm.rank)
        out_of_place = self._part(
            kernel,
            layout,
            OUT_OF_PLACE,
            lambda: job.out_of_place(send, recv),
            lambda: self._check_out_of_place(job, recv, corrupt),
            comm.out_of_place_note(kernel.op),
        )
        info = {
            "ranks": comm.size,
            "library": comm.library,
            **({"buffers": comm.buffers} if comm.buffers else {}),
            **({"comm_config": comm.comm_config} if comm.comm_config else {}),
            "bytes": layout.bytes,
            "count": layout.count,
            "bus_factor": factor,
            "timing": self.timing,
        }
        if job.in_place is None:
            info["time_is"] = f"the out_of_place part: {kernel.op} has no in-place form"
            return Prepared(parts=[out_of_place], info=info)
        in_place_call = job.in_place

        def check_in_place() -> Check:
            # The timed calls worked on the same buffer again and again (sums grow by n each call,
            # as in nccl-tests); the check restores the inputs and checks one call exactly.
            comm.copy(work, pristine)
            result = in_place_call(work)
            comm.synchronize()
            return self.agreed_check(result, job.expected, corrupt)

        in_place = self._part(kernel, layout, IN_PLACE, lambda: in_place_call(work), check_in_place, "")

        def after(backend: Any, rule: StopRule) -> dict[str, Any]:
            # The kernel's time is the in-place time (a sum of the two would mean nothing), so the
            # out-of-place call is measured here, the same way, and kept beside it in info.
            return {OUT_OF_PLACE: self.measure_part(out_of_place, rule)}

        info["time_is"] = "the in_place part; the out_of_place measurement is in info.out_of_place"
        return Prepared(parts=[in_place], info=info, after=after)

    def _layout(self, kernel: CollectiveKernel, precision: Precision) -> Layout:
        """The kernel's layout on this communicator's ranks, or why it cannot run here."""
        if precision is not Precision.FP32:
            raise Unsupported("the collectives are measured on float32 elements, as DeepBench's all-reduce")
        if self.comm.size > MAX_EXACT_RANKS:
            raise Unsupported(f"more than {MAX_EXACT_RANKS} ranks: the check's sums would not be exact in float32")
        layout = kernel.layout(self.comm.size)
        if layout.count == 0:
            raise Unsupported(
                f"{kernel.floats} floats over {self.comm.size} ranks leave no 16-byte share per rank "
                "(nccl-tests rounds each share down to 16 bytes)"
            )
        return layout

    def _buffers(self, kernel: CollectiveKernel, layout: Layout) -> tuple[Problem, Any, Any, Any, Any]:
        """The problem and its buffers (send, receive, the in-place inputs and their working copy) on every
        rank, or a failure every rank hears of (a rank that failed alone would leave the others waiting)."""
        comm = self.comm
        try:
            job = problem(kernel, comm, self.settings.seed)
            send = comm.buffer(job.inputs)
            recv = comm.empty(layout.recv)
            pristine = comm.buffer(job.in_place_buffer()) if job.in_place_buffer else None
            work = comm.buffer(job.in_place_buffer()) if job.in_place_buffer else None
            failure = ""
        except Unsupported:
            raise
        except Exception as exc:  # noqa: BLE001 - the other ranks must hear of it, or they wait forever
            failure = f"{type(exc).__name__}: {exc}"
        failed = [r for r, (ok,) in enumerate(comm.allgather([0.0 if failure else 1.0])) if not ok]
        if failed:
            raise RuntimeError(
                f"rank(s) {', '.join(map(str, failed))} could not allocate the buffers"
                + (f": {failure}" if failure else " (see their records under ranks/)")
            )
        return job, send, recv, pristine, work

    def _part(
        self,
        kernel: CollectiveKernel,
        layout: Layout,
        direction: str,
        run: Callable[[], object],
        check: Callable[[], Check],
        note: str,
    ) -> TimedPart:
        """One direction, timed by this runner (every rank decides together: measure)."""
        info: dict[str, Any] = {
            "ranks": self.comm.size,
            "bytes": layout.bytes,
            "count": layout.count,
            "bus_factor": kernel.bus_factor(self.comm.size),
            "timing": self.timing,
        }
        if note:
            info["note"] = note
        max_calls = kernel.repeat
        return TimedPart(
            direction=direction,
            run=run,
            check=check,
            flops=0.0,
            min_bytes=float(layout.bytes),
            info=info,
            capturable=False,
            timer=lambda fn, rule: self.measure(fn, rule, max_calls, info),
        )

    def _check_out_of_place(self, job: Problem, recv: Any, corrupt: bool) -> Check:
        self.comm.synchronize()
        return self.agreed_check(recv, job.expected, corrupt)

    def measure_part(self, part: TimedPart, rule: StopRule) -> dict[str, Any]:
        """Time and check one part (warm already: the sizes' warm-up and the calibration's first
        calls); a wrong element on any rank fails the kernel."""
        assert part.timer is not None
        measurement = part.timer(part.run, rule)
        check = part.check()
        if not check.passed:
            raise CheckFailed(f"{part.direction}: check failed ({check.method}): {check.detail}")
        result = PartResult(
            direction=part.direction,
            measurement=measurement,
            flops=0.0,
            min_bytes=part.min_bytes,
            check=check,
            gbps=part.info["algbw_gbps"],
            info=part.info,
        )
        return result.model_dump(mode="json")

    def warm_up(self, kernel: CollectiveKernel) -> None:
        """One out-of-place call of this collective at every DeepBench all-reduce size before its
        first kernel is timed (connections, buffers and algorithm choices of the library are set up
        here, not in a measurement)."""
        for floats in all_reduce_sizes():
            sized = kernel.model_copy(update={"floats": floats})
            layout = sized.layout(self.comm.size)
            if layout.count == 0:
                continue
            job = problem(sized, self.comm, self.settings.seed, data=False)
            send, recv = self.comm.buffer(job.inputs), self.comm.empty(layout.recv)
            job.out_of_place(send, recv)
            self.comm.synchronize()
            del send, recv
        self.comm.barrier()
        self.warmed_up.add(kernel.op)

    # ----- checking ---------------------------------------------------------------------
    def agreed_check(self, buf: Any, expected: np.ndarray | None, corrupt: bool) -> Check:
        """Exact comparison on this rank (where its result is defined: a reduce's root only),
        then every rank learns every rank's outcome."""
        wrong, first = self.comm.equal(buf, expected) if expected is not None else (0, -1)
        if corrupt:  # fault injection for tests: one rank sees one wrong element
            wrong, first = max(wrong, 1), 0 if first < 0 else first
        size = float(expected.size) if expected is not None else 0.0
        outcomes = self.comm.allgather([float(wrong), float(first), size])
        bad = [(r, int(w), int(f), int(n)) for r, (w, f, n) in enumerate(outcomes) if w > 0]
        checked = sum(1 for _, _, n in outcomes if n > 0)
        detail = "; ".join(
            f"rank {r}: {w} of {n} elements differ from the exact result (first at {f})" for r, w, f, n in bad
        )
        error = max(w / max(n, 1) for _, w, _, n in bad) if bad else 0.0
        held = (
            f"all {self.comm.size} ranks hold the exact result"
            if checked == self.comm.size
            else f"{checked} of {self.comm.size} ranks hold a defined result, and it is exact"
        )
        return Check(passed=not bad, method=CHECK_METHOD, error=error, tolerance=0.0, detail=detail or held)

    # ----- timing -----------------------------------------------------------------------
    def _timed(self, fn: Callable[[], object], calls: int) -> float:
        """Seconds for `calls` back-to-back calls on this rank, started together with the others:
        CUDA graph replays timed by events where the communicator can, else host-clocked calls."""
        if self.graphs is not None:
            return self.graphs.timed(fn, calls, self.comm.barrier, self._start_line)
        self.comm.synchronize()
        self.comm.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        self.comm.synchronize()
        return time.perf_counter() - t0

    def _start_line(self) -> None:
        """A one-element all-reduce on the current stream: every rank's device leaves it together."""
        if self._line is None:
            self._line = self.comm.buffer(np.zeros(1, dtype=np.float32))
        self.comm.all_reduce_in_place(self._line)

    def measure(self, fn: Callable[[], object], rule: StopRule, max_calls: int, info: dict[str, Any]) -> Measurement:
        """Rank-synchronised samples: each sample is `calls` back-to-back calls on every rank;
        the sample's time is the slowest rank's time per call (a collective is done when its
        last rank is). Total timed calls stay within the kernel's repeat count."""
        start = time.perf_counter()
        calls, warmup, last = self._calibrate(fn, max_calls)
        source = _RankSamples(self, fn, calls, last, start)
        budget = (Stop(REPEAT_COUNT, CallBudget(max_calls, calls)),)
        reason = sample_until(source, rule.criteria, budget)
        samples = source.samples
        # The calibration's last loop had the final call count: it is the first sample, not warm-up.
        m = Measurement.of(
            samples,
            method=self.method,
            calls_per_sample=calls,
            warmup_calls=warmup - calls,
            stop_reason=reason,
            target_rel_precision=rule.target_rel_precision,
        )
        info.update(collective_figures(m, source.per_rank, info["bytes"], info["bus_factor"], max_calls))
        return m

    def _calibrate(self, fn: Callable[[], object], max_calls: int) -> tuple[int, int, float]:
        """Calls per sample so that the slowest rank's sample lasts `min_sample_s`; the same
        number on every rank, since all decide from the gathered times. Returns (calls, calls
        made, this rank's seconds for the last loop, which had `calls` calls: the first sample)."""
        calls, made = 1, 0
        limit = max(1, min(MAX_CALLS_PER_SAMPLE, max_calls // max(1, self.settings.min_samples)))
        floor = self.settings.min_sample_s
        if self.graphs is not None:
            floor = max(floor, self.graphs.min_sample_s)  # graph_timing.py says why
        while True:
            mine = self._timed(fn, calls)
            elapsed = max(e for (e,) in self.comm.allgather([mine]))
            made += calls
            if elapsed >= floor or calls >= limit:
                return calls, made, mine
            calls = min(limit, max(2 * calls, int(calls * floor / max(elapsed, 1e-9)) + 1))


class _RankSamples:
    """The collective's side of the shared sampling loop: every rank times `calls` calls, all
    exchange their times, and the sample is the slowest rank's. The criteria judge rank 0's
    clock, so every rank stops alike."""

    def __init__(
        self, runner: CollectiveRunner, fn: Callable[[], object], calls: int, first_s: float, start: float
    ) -> None:
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
    """What every collective backend shares: its communicator and runner, the rank-synchronised
    timer each part brings, library versions, and the barrier before each kernel."""

    ranked = True  # rank: set from the communicator by each library's backend
    comm: Communicator
    runner: CollectiveRunner

    def prepare(self, kernel: Kernel, precision: Precision) -> Prepared:
        return self.runner.prepare(kernel, precision)

    def measure(self, fn: Callable[[], object], rule: StopRule, part: TimedPart) -> Measurement:
        assert part.timer is not None, "every collective part brings its rank-synchronised timer"
        return part.timer(fn, rule)

    def library_versions(self) -> dict[str, str]:
        return self.comm.versions()

    def item_barrier(self) -> None:
        """All ranks start each kernel together (harness __main__)."""
        self.comm.barrier()
