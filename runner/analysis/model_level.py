"""The model level of a model-suite run: the whole model's forward pass (a composite operation,
kernels/model_kernel.py) beside the sum of its operators' times, per model and precision.

The operator sum is runner/analysis/model_report.py's total (each operator's forward median weighted by its
calls per forward pass, Kernel.count); the ratio operator sum / whole model says what running the
operators together changes: above 1, fusion (onnxruntime's Conv+BatchNorm folding, fused attention)
and overlap make the model faster than its parts; below 1, what the parts leave out costs more
(framework overhead between calls, and the operators no kernel type covers: element-wise and data
movement, see `deepbench models extract`). `flops_covered` says how much of the model's matrix
work the measured operators hold, so a ratio over a partial sum is read as such.
Data only: the model report prints it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from deepbench.kernels.model_kernel import MODEL_SET
from deepbench.kernels.results import KernelResult, Status

from .model_report import FORWARD, is_whole_model, model_reports, precision_name, timed_parts

US_PER_S = 1e6


@dataclass
class ModelLevel:
    """One model in one precision: whole-model time and throughput against its operator sum."""

    model: str
    precision: str
    batch: int | None = None
    seq: int | None = None
    whole_us: float | None = None  # median time of one forward pass; None when not measured
    whole_status: str = "not run"  # the whole-model kernel's status (ok, unsupported, failed ...) or "not run"
    whole_reason: str = ""
    operator_sum_us: float = 0.0  # sum over measured operators of forward median x calls per pass
    operators_measured: int = 0
    operators_not_measured: int = 0
    model_flops: float | None = None  # the whole model's forward FLOPs (matrix work)
    operator_flops: float = 0.0  # the measured operators' forward FLOPs x calls

    @property
    def ratio(self) -> float | None:
        """Operator sum over whole-model time (> 1: the whole model is faster than its parts)."""
        return self.operator_sum_us / self.whole_us if self.whole_us and self.operator_sum_us else None

    @property
    def throughput_per_s(self) -> float | None:
        """Inputs (images, sequences) per second at the whole model's median."""
        return self.batch * US_PER_S / self.whole_us if self.whole_us and self.batch else None

    @property
    def flops_covered(self) -> float | None:
        """The measured operators' share of the model's FLOPs (1.0: all its matrix work)."""
        return self.operator_flops / self.model_flops if self.model_flops else None

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "ratio": self.ratio,
            "throughput_per_s": self.throughput_per_s,
            "flops_covered": self.flops_covered,
        }


def model_levels(results: list[KernelResult], directions: str = FORWARD) -> list[ModelLevel]:
    """One entry per (model, precision) that has a whole-model result or operator results, in
    first-seen order."""
    levels: dict[tuple[str, str], ModelLevel] = {}

    def level(model: str, prec: str) -> ModelLevel:
        return levels.setdefault((model, prec), ModelLevel(model, prec))

    for r in results:
        if r.kernel.set != MODEL_SET:
            continue
        lv = level(r.kernel.application or "?", precision_name(r))
        if not is_whole_model(r):
            continue
        k = r.kernel
        lv.batch, lv.seq, lv.model_flops = k.batch, k.seq, k.flops()
        lv.whole_status, lv.whole_reason = r.status.value, r.reason
        lv.whole_us = (
            sum(p.measurement.stats.median for p in timed_parts(r, directions)) if r.status is Status.OK else None
        )
    for rep in model_reports(results, directions):
        lv = level(rep.model, rep.precision)
        lv.operator_sum_us = rep.total_us
        lv.operators_measured = len(rep.operators)
        lv.operators_not_measured = len(rep.not_measured)
        lv.operator_flops = sum(t.flops for t in rep.types)
    return list(levels.values())
