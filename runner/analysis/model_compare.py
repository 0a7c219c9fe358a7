"""OpBench's two-device view: per operator type, is the speed-up of device B over device A what
their peak FLOPS ratio says?

Both runs are of the same model suite at the same batch (and sequence length), so each kernel of
one run has a twin in the other with the same parameters; kernels are matched by their operation,
parameters and precision (never by index, which depends on the selection), and those without a
twin are listed, not counted. Per type, the matched kernels' times are weighted by their calls per
forward pass (as in the report, runner/analysis/model_report.py) and summed on each device; the speed-up is
A's time over B's (above 1: B is faster).

The peak ratios are B's measured ceiling over A's (run.json: tflops_<precision>, gbps_copy). A
type is flagged where its ranking departs from the FLOPS ratio: the device with more peak FLOPS is
the slower one on this type, or the speed-up is more than DEPARTURE_FACTOR away (either way) from
the FLOPS ratio. Where a run measured no ceilings (one made before CPU runs measured theirs) there
is no ratio and no flag, and the comparison says why. Data only: runner/commands/models.py prints it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from deepbench.kernels.results import KernelResult, Status

from ..errors import UserError
from .model_report import FORWARD, ModelRun, is_whole_model, model_reports, peaks_note, precision_name
from .roofline import bandwidth, compute_peak

DEPARTURE_FACTOR = 2.0  # a speed-up more than 2x above or below the peak FLOPS ratio is flagged
REVERSED = "ranking reversed"
DEPARTS = "departs from FLOPS ratio"


def kernel_key(r: KernelResult) -> tuple[str, str, str]:
    """A kernel's identity across two runs of one model: operation, parameters, precision."""
    return r.kernel.op, json.dumps(r.kernel.params(), sort_keys=True), precision_name(r)


def ratio(a: float | None, b: float | None) -> float | None:
    """b over a, where both are known."""
    return b / a if a and b else None


def departures(speedup: float, flops_ratio: float | None, factor: float = DEPARTURE_FACTOR) -> list[str]:
    """How a type's speed-up (B vs A) departs from the devices' peak FLOPS ratio (B over A)."""
    if flops_ratio is None or speedup <= 0:
        return []
    flags = []
    if (speedup - 1.0) * (flops_ratio - 1.0) < 0:
        faster, more = ("B", "A") if speedup > 1 else ("A", "B")
        flags.append(f"{REVERSED}: {faster} is faster on this type, {more} has more peak FLOPS")
    off = speedup / flops_ratio
    if off > factor or off < 1.0 / factor:
        flags.append(
            f"{DEPARTS}: speed-up {speedup:.3g}x is {max(off, 1 / off):.3g}x "
            f"{'above' if off > 1 else 'below'} the peak FLOPS ratio {flops_ratio:.3g}x"
        )
    return flags


@dataclass
class TypeComparison:
    """One operator type over the kernels both runs measured."""

    op: str
    kernels: int
    time_a_us: float
    time_b_us: float
    bound: str | None  # the roofline limit most of its time falls under (A's ceilings, else B's)
    flags: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        """B vs A: A's time over B's (above 1: B is faster)."""
        return self.time_a_us / self.time_b_us if self.time_b_us > 0 else None


@dataclass
class PrecisionComparison:
    precision: str
    flops_ratio: float | None  # B's measured compute peak of this precision over A's
    bandwidth_ratio: float | None  # B's measured copy bandwidth over A's
    ratio_note: str = ""  # why a ratio is missing
    types: list[TypeComparison] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    @property
    def time_a_us(self) -> float:
        return sum(t.time_a_us for t in self.types)

    @property
    def time_b_us(self) -> float:
        return sum(t.time_b_us for t in self.types)

    @property
    def speedup(self) -> float | None:
        return self.time_a_us / self.time_b_us if self.time_b_us > 0 else None


@dataclass
class ModelComparison:
    model: str
    batch: int | None
    seq: int | None
    device_a: str
    device_b: str
    run_a: str
    run_b: str
    directions: str
    factor: float
    precisions: list[PrecisionComparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. precisions only one run measured

    def as_dict(self) -> dict:
        d = asdict(self)
        for pd, pc in zip(d["precisions"], self.precisions, strict=False):
            pd["time_a_us"], pd["time_b_us"], pd["speedup"] = pc.time_a_us, pc.time_b_us, pc.speedup
            for td, tc in zip(pd["types"], pc.types, strict=False):
                td["speedup"] = tc.speedup
                td["vs_flops_ratio"] = tc.speedup / pc.flops_ratio if tc.speedup and pc.flops_ratio else None
                td["vs_bandwidth_ratio"] = (
                    tc.speedup / pc.bandwidth_ratio if tc.speedup and pc.bandwidth_ratio else None
                )
        return d


def _unmatched(r: KernelResult, other: dict, side: str) -> str:
    twin = other.get(kernel_key(r))
    if twin is None:
        return r.id
    return f"{r.id} ({twin.status.value} in {side}{': ' + twin.reason if twin.reason else ''})"


def _ratio_note(ceilings_a: dict[str, float], ceilings_b: dict[str, float], precision: str) -> str:
    notes = [
        f"{side}: {note}" for side, c in (("A", ceilings_a), ("B", ceilings_b)) if (note := peaks_note(c, precision))
    ]
    return "; ".join(notes)


def compare_results(
    results_a: list[KernelResult],
    results_b: list[KernelResult],
    ceilings_a: dict[str, float],
    ceilings_b: dict[str, float],
    precision: str | None = None,
    directions: str = FORWARD,
    factor: float = DEPARTURE_FACTOR,
) -> list[PrecisionComparison]:
    """Per precision present in both (or the one asked for), the per-type comparison of the kernels
    both measured; whole-model rows (a composite operation) are not operator types and are left out."""

    def operators(results: list[KernelResult]) -> dict:
        return {
            kernel_key(r): r
            for r in results
            if not is_whole_model(r) and (precision is None or precision_name(r) == precision)
        }

    by_a, by_b = operators(results_a), operators(results_b)
    ok_a = {k: r for k, r in by_a.items() if r.status is Status.OK}
    ok_b = {k: r for k, r in by_b.items() if r.status is Status.OK}
    both = ok_a.keys() & ok_b.keys()
    out = []
    for prec in dict.fromkeys(k[2] for k in [*by_a, *by_b]):
        keys = [k for k in ok_a if k in both and k[2] == prec]
        pc = PrecisionComparison(
            prec,
            ratio(compute_peak(ceilings_a, prec), compute_peak(ceilings_b, prec)),
            ratio(bandwidth(ceilings_a), bandwidth(ceilings_b)),
            _ratio_note(ceilings_a, ceilings_b, prec),
        )
        pc.only_a = [_unmatched(r, by_b, "B") for k, r in by_a.items() if k[2] == prec and k not in both]
        pc.only_b = [_unmatched(r, by_a, "A") for k, r in by_b.items() if k[2] == prec and k not in both]
        reps_a = model_reports([ok_a[k] for k in keys], directions, ceilings_a)
        reps_b = model_reports([ok_b[k] for k in keys], directions, ceilings_b)
        shares_b = {t.op: t for rep in reps_b for t in rep.types}
        for rep in reps_a:
            for ta in rep.types:
                tb = shares_b[ta.op]
                tc = TypeComparison(ta.op, ta.kernels, ta.time_us, tb.time_us, ta.bound or tb.bound)
                if tc.speedup is not None:
                    tc.flags = departures(tc.speedup, pc.flops_ratio, factor)
                pc.types.append(tc)
        out.append(pc)
    return out


def _describe(run: ModelRun) -> str:
    return (
        f"{run.path} ({', '.join(run.models) or 'no model-suite results'}, batch {run.batch or '?'}"
        + (f", seq {run.seq}" if run.seq else "")
        + ")"
    )


def compare_runs(
    a: ModelRun, b: ModelRun, precision: str | None = None, directions: str = FORWARD, factor: float = DEPARTURE_FACTOR
) -> ModelComparison:
    """Two runs of one model suite on two devices; runs of different models or batches are a UserError."""
    for run, side in ((a, "A"), (b, "B")):
        if not run.models:
            raise UserError(
                f"run {side} {run.path} holds no model-suite results (run deepbench-run --suite model:NAME)"
            )
        if len(run.models) > 1:
            raise UserError(
                f"run {side} {run.path} holds several models ({', '.join(run.models)}): compare one model's runs"
            )
    if a.models != b.models:
        raise UserError(f"the runs are of different models: A {_describe(a)}, B {_describe(b)}")
    for what, va, vb in (("batches", a.batch, b.batch), ("sequence lengths", a.seq, b.seq)):
        if va is not None and vb is not None and va != vb:
            raise UserError(f"the runs are of different {what}: A {_describe(a)}, B {_describe(b)}")
    if factor <= 1:
        raise UserError("--factor must be above 1 (how far a speed-up may stray from the peak FLOPS ratio)")
    prec_a, prec_b = ({precision_name(r) for r in run.results if not is_whole_model(r)} for run in (a, b))
    precisions = prec_a & prec_b
    if precision is not None and precision not in precisions:
        raise UserError(
            f"precision {precision} is not in both runs (both have: {', '.join(sorted(precisions)) or 'none'})"
        )
    if not precisions:
        raise UserError(f"the runs share no precision: A {_describe(a)}, B {_describe(b)}")
    per_precision = [
        pc
        for pc in compare_results(a.results, b.results, a.ceilings, b.ceilings, precision, directions, factor)
        if pc.precision in precisions
    ]
    if not any(pc.types for pc in per_precision):
        raise UserError(
            f"the runs have no measured kernel in common (same parameters and precision): "
            f"A {_describe(a)}, B {_describe(b)}"
        )
    notes = [
        f"{p} only in {side}: not compared"
        for side, own, other in (("A", prec_a, prec_b), ("B", prec_b, prec_a))
        if precision is None
        for p in sorted(own - other)
    ]
    return ModelComparison(
        a.models[0],
        a.batch or b.batch,
        a.seq or b.seq,
        a.device,
        b.device,
        str(a.path),
        str(b.path),
        directions,
        factor,
        per_precision,
        notes,
    )
