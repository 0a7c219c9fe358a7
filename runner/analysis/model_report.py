"""OpBench's operator-level view of a model run: where a model's time goes, per operator type.

Each kernel of a model suite ran once per distinct shape; its median time is weighted by the
calls per forward pass (Kernel.count), so the shares are those of one forward pass. By default
only the forward direction counts (inference: convolution's backward-data/filter and the RNN's
backward are left out); `directions="all"` sums every timed direction, as a training step would.

Against the device's peaks: a GPU run records measured ceilings (run.json: tflops_<precision>,
gbps_copy). Each type's achieved TFLOP/s is shown as a share of the measured compute peak of its
precision and its GB/s (fewest bytes over time) as a share of the measured copy bandwidth; the
roofline bound of every timed part (the GPU backend writes it into the part's info, else it is
derived from the ceilings the same way) says which of the two limits the type, and the bound
time summed over the measured time is the type's "% of roof". A run without ceilings (CPU runs)
gets no such figure, and the report says why. Whole-model rows (a composite operation: its traits
say so) are not an operator type and are left out of the shares.
Data only: the command prints it (runner/commands/models.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.catalog import traits_of
from deepbench.kernels.format_versions import FormatVersionError, read_model
from deepbench.kernels.model_kernel import MODEL_SET
from deepbench.kernels.results import PLAN_FILE, RUN_FILE, KernelResult, PartResult, Plan, RunRecord, Status
from deepbench.kernels.timing.part_notes import RooflineInfo

from ..errors import UserError
from .roofline import GBPS, TFLOPS, US, bandwidth, compute_peak, no_roof_reason
from .sources import read_run_folder

FORWARD = "fwd"
COMPUTE, MEMORY = "compute", "memory"


def is_whole_model(r: KernelResult) -> bool:
    """A whole-model run (model-level latency): a composite operation, not an operator type."""
    return traits_of(r.kernel.op).composite


@dataclass
class TypeShare:
    """One operator type (the kernel's op) of one model in one precision."""

    op: str
    kernels: int = 0
    calls: int = 0
    time_us: float = 0.0
    flops: float = 0.0
    min_bytes: float = 0.0
    share: float = 0.0
    peak_tflops: float | None = None  # the run's measured compute peak for this precision
    peak_gbps: float | None = None  # the run's measured copy bandwidth
    roof_us: float = 0.0  # the time on the roofline: every part's bound time, weighted by calls
    roofed_us: float = 0.0  # the measured time of the parts that have a bound (all of them on a GPU)
    bound_time_us: dict[str, float] = field(default_factory=dict)  # measured time per bound kind

    @property
    def tflops(self) -> float | None:
        return self.flops / self.time_us / 1e6 if self.time_us > 0 and self.flops else None

    @property
    def gbps(self) -> float | None:
        """The fewest bytes the type must move over its time: the memory-bound layers' figure."""
        return self.min_bytes / self.time_us / 1e3 if self.time_us > 0 else None

    @property
    def pct_peak_flops(self) -> float | None:
        """Achieved TFLOP/s as % of the measured compute peak of this precision."""
        return 100.0 * self.tflops / self.peak_tflops if self.tflops and self.peak_tflops else None

    @property
    def pct_peak_bandwidth(self) -> float | None:
        """Achieved GB/s (fewest bytes) as % of the measured copy bandwidth."""
        return 100.0 * self.gbps / self.peak_gbps if self.gbps and self.peak_gbps else None

    @property
    def bound(self) -> str | None:
        """The roofline limit under which most of the type's measured time falls."""
        return max(self.bound_time_us, key=self.bound_time_us.__getitem__) if self.bound_time_us else None

    @property
    def pct_of_roof(self) -> float | None:
        """Time on the roofline over the measured time (100% = every kernel on its roof)."""
        return 100.0 * self.roof_us / self.roofed_us if self.roofed_us > 0 else None


@dataclass
class OperatorTime:
    id: str
    label: str
    count: int
    time_us: float  # per call
    weighted_us: float
    share: float = 0.0


@dataclass
class ModelReport:
    model: str
    precision: str
    directions: str
    total_us: float = 0.0
    types: list[TypeShare] = field(default_factory=list)
    operators: list[OperatorTime] = field(default_factory=list)
    not_measured: list[str] = field(default_factory=list)
    device: str = ""
    peak_tflops: float | None = None
    peak_gbps: float | None = None
    peaks_note: str = ""  # why a peak figure is missing (no measured ceilings ...), empty when both are there

    def as_dict(self) -> dict:
        d = asdict(self)
        for t, share in zip(d["types"], self.types, strict=False):
            t["tflops"], t["gbps"] = share.tflops, share.gbps
            t["pct_peak_flops"], t["pct_peak_bandwidth"] = share.pct_peak_flops, share.pct_peak_bandwidth
            t["bound"], t["pct_of_roof"] = share.bound, share.pct_of_roof
        return d


def precision_name(r: KernelResult) -> str:
    return getattr(r.precision.name, "value", str(r.precision.name))


def timed_parts(r: KernelResult, directions: str) -> list[PartResult]:
    return [p for p in r.parts if directions == "all" or p.direction == FORWARD]


def _time_flops_bytes(r: KernelResult, directions: str) -> tuple[float, float, float]:
    parts = timed_parts(r, directions)
    return (
        sum(p.measurement.stats.median for p in parts),
        sum(p.flops for p in parts),
        sum(p.min_bytes for p in parts),
    )


def part_roof(part: PartResult, precision: str, ceilings: dict[str, float]) -> tuple[str, float] | None:
    """(bound kind, bound time in us) of one timed part: the roofline the GPU backend recorded in the
    part's info, else the same definition (runner/analysis/roofline.py) from the run's ceilings; None without."""
    recorded = info_of(RooflineInfo, part.info)
    carried = recorded.roofline if recorded else None
    if carried is not None and carried.bound in (COMPUTE, MEMORY) and carried.bound_us:
        return carried.bound, float(carried.bound_us)
    times = {}
    peak, bw = compute_peak(ceilings, precision), bandwidth(ceilings)
    if peak and part.flops:
        times[COMPUTE] = part.flops / (peak * TFLOPS) / US
    if bw and part.min_bytes:
        times[MEMORY] = part.min_bytes / (bw * GBPS) / US
    if not times:
        return None
    kind = max(times, key=times.__getitem__)
    return kind, times[kind]


def peaks_note(ceilings: dict[str, float], precision: str) -> str:
    """Why the report has no peak figure for this precision ('' when it has both)."""
    if not ceilings:
        return no_roof_reason(ceilings, "run")
    missing = [
        name
        for name, value in (
            (f"tflops_{precision}", compute_peak(ceilings, precision)),
            ("gbps_copy", bandwidth(ceilings)),
        )
        if not value
    ]
    return f"the run measured no {' or '.join(missing)}" if missing else ""


def model_reports(
    results: list[KernelResult], directions: str = FORWARD, ceilings: dict[str, float] | None = None, device: str = ""
) -> list[ModelReport]:
    """One report per (model, precision) among the results of model suites, in first-seen order;
    `ceilings` (the run's measured peaks) add the throughput against the device's peaks."""
    ceilings = ceilings or {}
    reports: dict[tuple[str, str], ModelReport] = {}
    for r in results:
        if r.kernel.set != MODEL_SET or is_whole_model(r):
            continue
        model = r.kernel.application or "?"
        prec = precision_name(r)
        rep = reports.get((model, prec))
        if rep is None:
            rep = reports[(model, prec)] = ModelReport(
                model,
                prec,
                directions,
                device=device,
                peak_tflops=compute_peak(ceilings, prec),
                peak_gbps=bandwidth(ceilings),
                peaks_note=peaks_note(ceilings, prec),
            )
        count = r.kernel.count or 1
        if r.status is not Status.OK:
            rep.not_measured.append(f"{r.id} ({r.status.value}{': ' + r.reason if r.reason else ''})")
            continue
        per_call, flops, moved = _time_flops_bytes(r, directions)
        share = next((t for t in rep.types if t.op == r.kernel.op), None)
        if share is None:
            share = TypeShare(r.kernel.op, peak_tflops=rep.peak_tflops, peak_gbps=rep.peak_gbps)
            rep.types.append(share)
        share.kernels += 1
        share.calls += count
        share.time_us += per_call * count
        share.flops += flops * count
        share.min_bytes += moved * count
        for part in timed_parts(r, directions):
            roof = part_roof(part, prec, ceilings)
            if roof is not None:
                measured = part.measurement.stats.median * count
                share.roof_us += roof[1] * count
                share.roofed_us += measured
                share.bound_time_us[roof[0]] = share.bound_time_us.get(roof[0], 0.0) + measured
        rep.operators.append(OperatorTime(r.kernel.id, r.kernel.label(), count, per_call, per_call * count))
    for rep in reports.values():
        rep.total_us = sum(t.time_us for t in rep.types)
        for t in rep.types:
            t.share = t.time_us / rep.total_us if rep.total_us else 0.0
        for o in rep.operators:
            o.share = o.weighted_us / rep.total_us if rep.total_us else 0.0
        rep.types.sort(key=lambda t: -t.time_us)
        rep.operators.sort(key=lambda o: -o.weighted_us)
    return list(reports.values())


# ----- a results folder, as the model commands read it ---------------------------------------
@dataclass
class ModelRun:
    """A deepbench-run results folder of a model suite: its results and what the run recorded."""

    path: Path
    results: list[KernelResult]
    run: RunRecord | None
    plan: Plan | None

    @property
    def ceilings(self) -> dict[str, float]:
        return dict(self.run.ceilings) if self.run else {}

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(r.kernel.application or "?" for r in self.results if r.kernel.set == MODEL_SET))

    @property
    def batch(self) -> int | None:
        """The batch the operators were taken at, as the plan declared it (None: not recorded)."""
        sel = self.plan.selection if self.plan else None
        return sel.batch if sel else None

    @property
    def seq(self) -> int | None:
        sel = self.plan.selection if self.plan else None
        return sel.seq if sel else None

    @property
    def device(self) -> str:
        """The device in words: its name, and the threads for a CPU (they are what differs there)."""
        if self.run is None:
            return f"{self.path.name} (no {RUN_FILE}: device unknown)"
        d = self.run.device
        name = str(d.get("name") or self.run.platform)
        if d.get("kind") == "cpu":
            threads = self.run.settings.threads or d.get("threads")
            name += f", {threads} threads" if threads else ""
        return name


def _record(path: Path, model: type[BaseModel], what: str) -> Any:
    if not path.exists():
        return None
    try:
        return read_model(model, path.read_bytes(), str(path))
    except FormatVersionError as exc:
        raise UserError(str(exc)) from None
    except (ValidationError, ValueError) as exc:
        raise UserError(f"{path} is malformed ({what}): {str(exc).strip().splitlines()[0]}") from None


def load_model_run(path: Path) -> ModelRun:
    """Read a results folder; mistakes (no folder, no results, malformed files) are one-line UserErrors."""
    results, run = read_run_folder(path)
    return ModelRun(path, results, run, _record(path / PLAN_FILE, Plan, "plan"))
