"""The result model: plans, per-kernel results and run records, as immutable pydantic models.

Host and harness speak through files, not Python objects: the runner writes a `Plan` (JSON),
the harness writes one `KernelResult` per line to `results.jsonl` as soon as a kernel is
measured and a `RunRecord` at the end, and the host validates all of them with these models.

Like torch.utils.benchmark's Measurement and pyperf's Run, a `Measurement` keeps its raw samples
and carries statistics derived from them; the validator re-derives the statistics, so a record
whose figures were edited without its samples fails to load. A sample is a time, so it is positive
and finite; one taken while the process stood still (a pause: kernels/stalls.py) stays among the raw
samples, named in `stalled`, and the statistics are made of the others.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator
from pydantic.fields import FieldInfo

from .catalog import KERNEL_DISCRIMINATOR, AnyKernel, on_union_change
from .noise import NoiseRecord
from .precision import Precision, PrecisionInfo
from .provenance import Provenance
from .stalls import kept_samples, stalled_samples
from .system import SystemDescription

RESULT_SCHEMA: Final = "deepbench.result/2"
RUN_SCHEMA: Final = "deepbench.run/2"
PLAN_SCHEMA: Final = "deepbench.plan/2"
# Relative slack when re-deriving statistics from samples (JSON round-trips floats exactly,
# so this only absorbs summation order).
STATS_RTOL = 1e-9
MAX_SEED = 2**63 - 1  # the generators take 64-bit seeds; a non-negative signed one fits all of them
# How a run stands (RunRecord.state): `running` until it stops, then how it stopped.
RunState = Literal["running", "complete", "interrupted", "failed"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Status(str, Enum):
    OK = "ok"
    UNSUPPORTED = "unsupported"
    FAILED = "failed"
    TIMEOUT = "timeout"


class TimeStats(Frozen):
    """Order statistics of per-call times in microseconds."""

    median: float
    min: float
    max: float
    mean: float
    p25: float
    p75: float
    n: int = Field(ge=1)

    @property
    def rel_iqr(self) -> float:
        """Interquartile range over the median: the noise figure reports show."""
        return (self.p75 - self.p25) / self.median if self.median > 0 else math.inf

    @classmethod
    def of(cls, samples: Iterable[float]) -> TimeStats:
        xs = sorted(samples)
        if not xs:
            raise ValueError("no samples")
        q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
        return cls(
            median=statistics.median(xs),
            min=xs[0],
            max=xs[-1],
            mean=statistics.fmean(xs),
            p25=q[0],
            p75=q[2],
            n=len(xs),
        )

    @classmethod
    def total(cls, parts: Iterable[TimeStats]) -> TimeStats:
        """The kernel's total over its directions: each statistic summed (medians of the
        parts, not the median of a sum: the directions are measured separately)."""
        ps = list(parts)
        return cls(
            median=sum(p.median for p in ps),
            min=sum(p.min for p in ps),
            max=sum(p.max for p in ps),
            mean=sum(p.mean for p in ps),
            p25=sum(p.p25 for p in ps),
            p75=sum(p.p75 for p in ps),
            n=min(p.n for p in ps),
        )

    def close_to(self, other: TimeStats) -> bool:
        return self.n == other.n and all(
            math.isclose(getattr(self, f), getattr(other, f), rel_tol=STATS_RTOL, abs_tol=1e-12)
            for f in ("median", "min", "max", "mean", "p25", "p75")
        )


class PowerState(Frozen):
    """The device's power state read before or after an energy loop (NVML; a CPU's meter says less)."""

    temperature_c: float | None = None
    sm_mhz: float | None = None
    mem_mhz: float | None = None
    power_w: float | None = Field(None, description="the meter's power reading (Energy.power_reading)")
    throttle: tuple[str, ...] | None = Field(None, description="NVML's active slowdown reasons (None: not readable)")


class Energy(Frozen):
    """Energy of one timed direction, read from a meter around a loop of back-to-back calls run
    after the timed samples (kernels/timing/energy.py): long enough for the meter to update at
    least `MIN_UPDATES` times and for `window_s`, so the counter's update period does not decide
    the figure. `joules` is what the meter counted between its first and last update seen while
    the device was busy; `watts` is that over `window_s`; a call's energy is those watts times the
    loop's time per call."""

    meter: str = Field(
        description="nvml-total-energy (NVIDIA), rapl-package (a CPU's powercap), "
        "pi5-pmic (a Raspberry Pi 5's rails, sampled power)"
    )
    joules: float = Field(ge=0, description="energy the meter counted over window_s")
    window_s: float = Field(gt=0, description="from the first to the last meter update taken into account")
    watts: float = Field(ge=0)
    calls: int = Field(ge=1, description="calls the loop ran")
    loop_us_per_call: float = Field(gt=0, description="the loop's wall time per call (beside the timed median)")
    joules_per_call: float = Field(ge=0)
    updates: int = Field(ge=0, description="meter updates (counter changes, or power samples) within the window")
    update_period_s: float | None = Field(None, description="median time between two updates the loop saw")
    gflops_per_j: float | None = None
    gb_per_j: float | None = Field(None, description="the part's minimum bytes per joule (bandwidth-bound parts)")
    sampled_joules: float | None = Field(
        None,
        description="the integral of sampled power over the same window "
        "(power_reading's samples, trapezoids): a cross-check of the counter",
    )
    power_samples: int = Field(0, ge=0)
    power_reading: str = Field(
        "",
        description="the power reading sampled: nvml-instant (NVML_FI_DEV_POWER_INSTANT), nvml-average "
        "(nvmlDeviceGetPowerUsage, a 1 s average on Ampere and newer GPUs but GA100), pi5-pmic-rails; "
        "empty in records made before it was named (they sampled nvml-average)",
    )
    power_limit_w: float | None = Field(None, description="the enforced power limit (nvmlDeviceGetEnforcedPowerLimit)")
    before: PowerState | None = None
    after: PowerState | None = None
    note: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Energy:
        if not math.isclose(self.watts, self.joules / self.window_s, rel_tol=STATS_RTOL, abs_tol=1e-12):
            raise ValueError("watts is not joules over window_s")
        if not math.isclose(
            self.joules_per_call, self.watts * self.loop_us_per_call / 1e6, rel_tol=STATS_RTOL, abs_tol=1e-15
        ):
            raise ValueError("joules_per_call is not watts times the loop's time per call")
        return self

    def rated(self, flops: float, min_bytes: float) -> Energy:
        """With the part's work per joule (GFLOP/J; GB/J of its minimum traffic)."""
        if self.joules_per_call <= 0:
            return self
        return self.model_copy(
            update={
                "gflops_per_j": flops / self.joules_per_call / 1e9 if flops else None,
                "gb_per_j": min_bytes / self.joules_per_call / 1e9 if min_bytes else None,
            }
        )


# Closed sets of the labels a result carries (deepbench check refuses others): why sampling stopped
# (timing/stopping.py), which timer made the samples (timing/), how the output was checked.
StopReason = Literal["converged", "time-cap", "max-samples", "repeat-count"]
STOP_REASONS: tuple[str, ...] = get_args(StopReason)
TIMER_METHODS: tuple[str, ...] = (
    "cpu-perf-counter",
    "cuda-graph-events",
    "cuda-graph-cupti",
    "cuda-events-eager",
    "cuda-events-cold",
    "collective-host-clock",
    "collective-cuda-graph-events",  # backends/collectives/graph_timing.py: a GPU collective's graph replays
)
CHECK_METHODS: tuple[str, ...] = (
    "reference-fp64",
    "reference-fp64-model",
    "sampled-fp64",
    "freivalds",
    "freivalds-exact",
    "exact-int",
    "exact-sum",
    "requantized-int",
    "sampled-exact-int",
)
# Flags the harness sets (harness/execute.py) and the contention flag (issue 42).
RESULT_FLAGS: tuple[str, ...] = (
    "unconverged",
    "noisy",
    "throttled",
    "timing-disagrees",
    "contended",
    "clock-fell",
    "stalled",
)
# One sample: a time per call, so positive and finite (a zero, a negative or an infinite time is no measurement).
SampleUs = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Measurement(Frozen):
    """Raw samples of one timed direction and how they were taken.

    Each sample is the mean time of one call over `calls_per_sample` back-to-back calls (a CUDA
    graph replay of that many unrolled calls on a GPU, a timed loop on a CPU)."""

    method: str = Field(
        description="timer that made the samples, e.g. cpu-perf-counter, cuda-graph-events, cuda-graph-cupti"
    )
    samples_us: tuple[SampleUs, ...] = Field(min_length=1)
    calls_per_sample: int = Field(ge=1)
    warmup_calls: int = Field(ge=0)
    stop_reason: StopReason = Field(description="converged, time-cap, max-samples or repeat-count")
    target_rel_precision: float
    stats: TimeStats
    discarded: int = Field(0, ge=0, description="samples dropped (e.g. taken while throttled)")
    stalled: tuple[int, ...] = Field(
        (),
        description="indices of the samples taken while the process stood still (a pause: SIGSTOP, a "
        "descheduled VM): kept in samples_us, left out of stats (kernels/stalls.py)",
    )
    clocks_mhz: tuple[float, ...] = Field((), description="SM clock read beside the samples, where readable")
    mem_clock_mhz: float | None = Field(None, description="the memory clock after sampling (NVML), where readable")
    energy: Energy | None = Field(None, description="--energy: the meter read around a loop of calls after sampling")
    others_cores: float | None = Field(
        None,
        ge=0,
        description="CPU run: CPU cores other processes kept busy on the "
        "CPUs the run may use while these samples were taken (kernels/noise.py)",
    )
    spare_cores: int | None = Field(None, ge=0, description="CPU run: CPUs the run may use that its threads left free")

    @model_validator(mode="after")
    def _stats_match_samples(self) -> Measurement:
        n = len(self.samples_us)
        if list(self.stalled) != sorted(set(self.stalled)) or any(not 0 <= i < n for i in self.stalled):
            raise ValueError("stalled names samples that are not there, or one twice")
        if len(self.stalled) >= n:
            raise ValueError("every sample is stalled: the statistics would be of none")
        if not self.stats.close_to(TimeStats.of(self.kept_us)):
            raise ValueError("stats do not match samples_us (less the stalled ones)")
        return self

    @classmethod
    def of(cls, samples_us: Iterable[float], **kw: Any) -> Measurement:
        """The measurement of these samples: the stalled ones named (kernels/stalls.py) and left out
        of its statistics."""
        xs = tuple(float(x) for x in samples_us)
        stalled = stalled_samples(xs, kw.get("calls_per_sample", 1))
        return cls(samples_us=xs, stalled=stalled, stats=TimeStats.of(kept_samples(xs, stalled)), **kw)

    @property
    def kept_us(self) -> list[float]:
        """The samples the statistics are made of (all but the stalled ones)."""
        return kept_samples(self.samples_us, self.stalled)

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"


class Check(Frozen):
    """Correctness of the outputs the timed call produced."""

    passed: bool
    method: str = Field(description="reference-fp64, freivalds, exact-int, exact-sum ...")
    error: float | None = Field(None, description="relative Frobenius-norm error (NaN is never passed)")
    tolerance: float
    detail: str = ""


class PartResult(Frozen):
    """One timed direction of a kernel (GEMM has one; conv fwd/bwd_data/bwd_filter; RNN fwd/bwd)."""

    direction: str
    measurement: Measurement
    flops: float
    min_bytes: float
    check: Check
    tflops: float | None = None
    gbps: float | None = None
    info: dict[str, Any] = Field(default_factory=dict, description="library facts: algorithm chosen, engine ...")


# What the inputs are drawn from (Settings.inputs; deepbench-run --inputs): kernels/inputs.py says how.
InputDistribution = Literal["normal", "uniform", "zeros", "deepbench"]
INPUT_DISTRIBUTIONS: tuple[str, ...] = get_args(InputDistribution)

# What one kernel's operands were drawn from (InputDistribution resolved for its precision).
DrawnInputs = Literal["normal", "uniform", "zeros"]

# How long and how precisely kernels are sampled (Settings.mode; the presets: runner/launch/running/modes.py).
MeasureMode = Literal["fast", "default", "rigorous"]
# The problem handed to the library (Settings.pad; kernels/padding.py).
Padding = Literal["deepbench", "none", "both"]


class ResultFields(Frozen):
    """A kernel result's fields and rules, without the reading of its derived keys (KernelResult):
    a model-level `before` validator makes pydantic validate JSON as Python objects, which its
    strict mode cannot do (a datetime or a tuple arrives as a string or a list), so `deepbench
    check` validates each record's types with this class in strict mode, then reads it as a
    KernelResult."""

    schema_version: Literal["deepbench.result/2"] = RESULT_SCHEMA
    id: str = Field(description="op/set/index/precision/backend, unique within a run")
    kernel: AnyKernel
    precision: PrecisionInfo
    backend: str
    library: dict[str, str] = Field(default_factory=dict, description="versions of the native libraries used")
    status: Status
    reason: str = ""
    time_us: TimeStats | None = None
    tflops: float | None = None
    gbps: float | None = None
    check: Check | None = None
    parts: tuple[PartResult, ...] = ()
    padding: dict[str, int] = Field(default_factory=dict, description="dimensions padded, e.g. int8 to 4")
    inputs: DrawnInputs | None = Field(
        None,
        description="what the operands were drawn from (--inputs resolved for "
        "this precision, kernels/inputs.py); None: results from before the option, "
        "which drew normal values",
    )
    flags: tuple[str, ...] = ()
    info: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime
    ended_at: datetime

    @model_validator(mode="after")
    def _consistent(self) -> ResultFields:
        if self.status is Status.OK:
            if not self.parts or self.time_us is None or self.check is None:
                raise ValueError("an ok result needs parts, time_us and check")
            if not all(p.check.passed for p in self.parts):
                raise ValueError("an ok result cannot hold a failed check")
            if not self.time_us.close_to(TimeStats.total(p.measurement.stats for p in self.parts)):
                raise ValueError("time_us does not match the parts' measurements")
        elif not self.reason:
            raise ValueError(f"a {self.status.value} result needs a reason")
        return self

    # op, set and params are written at the top of every record too, for readers of the JSON
    # (jq, spreadsheets); on reading they are checked against the kernel and dropped.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def op(self) -> str:
        return self.kernel.op

    @computed_field  # type: ignore[prop-decorator]
    @property
    def set(self) -> str:
        return self.kernel.set

    @computed_field  # type: ignore[prop-decorator]
    @property
    def params(self) -> dict:
        return self.kernel.params()


DERIVED_KEYS = ("op", "set", "params")


def drop_derived(data: Any) -> Any:
    """A record's data without the derived keys, after checking them against its kernel."""
    if isinstance(data, dict) and any(k in data for k in DERIVED_KEYS):
        data = dict(data)
        kernel = data.get("kernel")
        derived = {k: data.pop(k) for k in DERIVED_KEYS if k in data}
        if isinstance(kernel, dict):
            not_params = ("op", "set", "index", "application", "count")
            expected = {
                "op": kernel.get("op"),
                "set": kernel.get("set"),
                "params": {k: v for k, v in kernel.items() if k not in not_params},
            }
            for key, value in derived.items():
                if value != expected[key]:
                    raise ValueError(f"{key} does not match the kernel")
    return data


class KernelResult(ResultFields):
    """One kernel in one precision on one backend: the record the harness streams per line."""

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        return drop_derived(data)


class Settings(Frozen):
    """How kernels are measured: user tunables, recorded in every plan and run."""

    mode: MeasureMode = "default"
    target_rel_precision: float = Field(
        0.01, gt=0, description="stop when the median's 95% CI half-width is below this"
    )
    min_samples: int = Field(5, ge=1)
    max_samples: int = Field(1000, ge=1)
    time_cap_s: float = Field(1.0, gt=0, description="per direction, after calibration")
    min_sample_s: float = Field(0.001, gt=0, description="calibrate calls per sample to at least this long")
    min_time_s: float = Field(0.0, ge=0, description="take samples for at least this long before stopping on noise")
    limited_min_time_s: float = Field(
        0.0,
        ge=0,
        description="GPU: the minimum time instead, when the power limiter "
        "holds the clock below boost (its swing takes longer to average out)",
    )
    calm_min_time_s: float | None = Field(
        None,
        ge=0,
        description="GPU: where every clock reading of a stretch is calm (boost clock, no slowdown, power "
        "under 60% of its limit: kernels/timing/settling.py), the minimum time follows the samples' spread "
        "down to this (kernels/timing/stopping.py spread_floor); None: min_time_s always",
    )
    warm_up_s: float = Field(
        0.0,
        ge=0,
        description="GPU: before the first measurement, run a large GEMM until the "
        "temperature settles, at most this long (kernels/timing/warmup.py)",
    )
    kernel_timeout_s: float = Field(600.0, gt=0, description="a kernel still running after this is killed: timeout")
    threads: int | None = Field(None, ge=1, description="CPU threads (None: all cores)")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the random inputs")
    device: str = "cpu"
    cold: bool = Field(False, description="flush caches before every call (GPU)")
    verify_timing: bool = Field(False, description="cross-check timings with the profiler (GPU)")
    kernel_time: bool = Field(
        True,
        description="GPU: time calls under 20 us by their kernels' own durations (CUPTI) "
        "instead of graph replays timed by events (kernels/timing/cupti_kernel.py KernelTimes)",
    )
    ranks: int = Field(1, ge=1, description="processes of a collective (all-reduce), started by torchrun or mpirun")
    pad: Padding = Field(
        "deepbench",
        description="deepbench: pad as DeepBench did (kernels/padding.py); none: the raw shape; "
        "both: the padded shape, and the raw one beside it (the alignment penalty)",
    )
    inputs: InputDistribution = Field(
        "normal",
        description="what operands are drawn from: normal (standard normal, as always), uniform [0, 1), "
        "zeros, or deepbench (what DeepBench's binaries drew: zeros for half and int8, uniform [0, 1) for float)",
    )
    energy: bool = Field(False, description="measure each part's energy after its time (kernels/timing/energy.py)")
    energy_window_s: float = Field(0.5, gt=0, description="--energy: the shortest window the meter is read over")
    lock_clocks: int | Literal["max"] | None = Field(
        None, description="GPU: ask NVML to lock the SM clock for the run: 'max' (the highest supported) or MHz"
    )
    backend_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="each backend's own options, by the backend's name (absent: its defaults); the "
        "backend's declaration validates them (kernels/backends/contract/declaration.py); format /2, /1 files kept "
        "cuDNN's and NCCL's at the top level (kernels/format_versions.py moves them)",
    )


class PlanItem(Frozen):
    kernel: AnyKernel
    precision: Precision  # written as its name ("fp16"), as plans always were

    @property
    def id(self) -> str:
        return f"{self.kernel.id}/{self.precision.value}"


class Selection(Frozen):
    """The user's selection within a suite, recorded in the plan so that a checker can re-derive
    the plan's kernels from the frozen suite definition (`deepbench check`)."""

    ops: tuple[str, ...] | None = None
    where: tuple[str, ...] = ()
    limit: int | None = None
    precisions: tuple[Precision, ...] | None = Field(None, description="None: the platform's defaults for the suite")
    default_precisions: dict[str, tuple[str, ...]] | None = Field(
        None,
        description="where `precisions` is None: the platform's precisions per '<set>/<op>' when the plan was "
        "made (defaults differ by operation, and may change between versions)",
    )
    batch: int | None = Field(None, description="model suites (model:NAME): the batch the operators were taken at")
    seq: int | None = Field(None, description="model suites: the sequence length")


class Plan(Frozen):
    """What the harness must run: written by the runner, read by the harness."""

    schema_version: Literal["deepbench.plan/2"] = PLAN_SCHEMA
    run_id: str
    suite: str
    platform: str
    backend: str
    settings: Settings
    items: tuple[PlanItem, ...]
    command: str = ""
    selection: Selection | None = Field(None, description="the scope declared: suite + this selection")
    frozen_suite_sha256: str | None = Field(
        None,
        description="the named suite before selection, hashed by the "
        "runner (the harness need not rebuild a model suite to know it)",
    )


class Segment(Frozen):
    """One stretch of a run, from a start (or a --resume) to its stop. A run stopped by a signal,
    a crash or a full disk and resumed has several; its results lie within them."""

    started_at: datetime
    ended_at: datetime | None = Field(
        None,
        description="None while it runs, or when it ended without a word "
        "(killed): the resume then closes it at its last result",
    )
    state: Literal["running", "complete", "interrupted", "failed", "killed"] = "running"
    command: str = ""


class RunRecord(Frozen):
    """The whole run: written when it starts (state `running`), rewritten when it stops (also
    after an interruption), so that a folder always says what it holds and how it was run."""

    schema_version: Literal["deepbench.run/2"] = RUN_SCHEMA
    run_id: str
    tool_version: str
    suite: str
    platform: str
    backend: str
    settings: Settings
    command: str = ""
    state: RunState
    planned: int
    counts: dict[str, int] = Field(default_factory=dict, description="results per status")
    device: dict[str, Any] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    software: dict[str, str] = Field(default_factory=dict)
    ceilings: dict[str, float] = Field(
        default_factory=dict, description="measured peaks: tflops_<precision>, gbps_copy"
    )
    provenance: Provenance = Field(default_factory=Provenance)
    system: SystemDescription | None = Field(None, description="where the kernels ran (collected by the harness)")
    host_system: SystemDescription | None = Field(None, description="the host that launched them (the runner)")
    noise: NoiseRecord | None = Field(
        None,
        description="how quiet the machine was before and after the run "
        "(kernels/noise.py), with warnings where it makes figures doubtful",
    )
    started_at: datetime
    ended_at: datetime
    segments: tuple[Segment, ...] = Field((), description="each start and resume of the run, with its stop")
    plan_sha256: str | None = Field(
        None, description="SHA-256 of plan.json's bytes when the run started: a resume refuses a plan changed since"
    )


# ----- files -------------------------------------------------------------------------------
RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
PLAN_FILE = "plan.json"


class ResultsFileError(ValueError):
    """A results file with a damaged line in the middle: named by its line number."""


def _take_new_union(union: Any) -> None:
    """A kernel class was registered (kernels/catalog.register_kernel): the models here that hold
    kernels are rebuilt with the new union, in the order they are defined (a model after those it holds)."""
    global AnyKernel
    AnyKernel = union
    for value in list(globals().values()):
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == __name__:
            for name, info in value.__pydantic_fields__.items():
                if info.discriminator == KERNEL_DISCRIMINATOR:  # a field of kernels: the new union
                    value.__pydantic_fields__[name] = FieldInfo.merge_field_infos(
                        FieldInfo.from_annotation(union), description=info.description
                    )
            value.model_rebuild(force=True)


on_union_change(_take_new_union)
