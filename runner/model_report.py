"""OpBench's operator-level view of a model run: where a model's time goes, per operator type.

Each kernel of a model suite ran once per distinct shape; its median time is weighted by the
calls per forward pass (Kernel.count), so the shares are those of one forward pass. By default
only the forward direction counts (inference: convolution's backward-data/filter and the RNN's
backward are left out); `directions="all"` sums every timed direction, as a training step would.
Data only: the command prints it (runner/commands/models.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..kernels.results import KernelResult, Status

FORWARD = "fwd"


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

    @property
    def tflops(self) -> float | None:
        return self.flops / self.time_us / 1e6 if self.time_us > 0 and self.flops else None

    @property
    def gbps(self) -> float | None:
        """The fewest bytes the type must move over its time: the memory-bound layers' figure."""
        return self.min_bytes / self.time_us / 1e3 if self.time_us > 0 else None


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

    def as_dict(self) -> dict:
        d = asdict(self)
        for t, share in zip(d["types"], self.types):
            t["tflops"], t["gbps"] = share.tflops, share.gbps
        return d


def _time_flops_bytes(r: KernelResult, directions: str) -> tuple[float, float, float]:
    parts = [p for p in r.parts if directions == "all" or p.direction == FORWARD]
    return (sum(p.measurement.stats.median for p in parts), sum(p.flops for p in parts),
            sum(p.min_bytes for p in parts))


def model_reports(results: list[KernelResult], directions: str = FORWARD) -> list[ModelReport]:
    """One report per (model, precision) among the results of model suites, in first-seen order."""
    reports: dict[tuple[str, str], ModelReport] = {}
    for r in results:
        if r.kernel.set != "model":
            continue
        model = r.kernel.application or "?"
        prec = getattr(r.precision.name, "value", str(r.precision.name))
        rep = reports.setdefault((model, prec), ModelReport(model, prec, directions))
        count = r.kernel.count or 1
        if r.status is not Status.OK:
            rep.not_measured.append(f"{r.id} ({r.status.value}{': ' + r.reason if r.reason else ''})")
            continue
        per_call, flops, moved = _time_flops_bytes(r, directions)
        share = next((t for t in rep.types if t.op == r.kernel.op), None)
        if share is None:
            share = TypeShare(r.kernel.op)
            rep.types.append(share)
        share.kernels += 1
        share.calls += count
        share.time_us += per_call * count
        share.flops += flops * count
        share.min_bytes += moved * count
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
