"""What one `ok` result must hold by itself and against the plan's settings, each figure re-derived from
the samples instead of trusted: its checks passed within a tolerance this tool allows, enough samples for
the run's stop rule, the stop reason the rule gives those samples (stop_replay.py), the stalled samples
the stall rule finds (kernels/stalls.py), every flag (kernels/result_flags.py) and the rates (TFLOP/s and
GB/s from the FLOPs, the fewest bytes and the median). The statistics themselves are re-derived from the
samples when the record is read (kernels/results.py), and the samples must be positive and finite there."""

from __future__ import annotations

import math
from typing import Any

from ...kernels.backends.contract.declaration import info_of
from ...kernels.catalog import traits_of
from ...kernels.harness.execute import stop_rule
from ...kernels.harness.wall_info import WallInfo
from ...kernels.model_kernel import MODEL_TOLERANCE
from ...kernels.op_traits import Tolerance
from ...kernels.precision import TRANSFORM_TOLERANCE, recurrence_tolerance, tolerance
from ...kernels.result_flags import FLAG_ORDER, due_flags
from ...kernels.results import Check, KernelResult, Measurement, PartResult, Plan
from ...kernels.stalls import stalled_samples
from ...kernels.timing.part_notes import TimerNotes
from ...kernels.timing.stopping import REPEAT_COUNT, CallBudget, Stop
from . import layout
from .check_report import Add
from .stop_replay import judged_of, stop_problem

DERIVED_RTOL = 1e-6  # TFLOPS re-derived from FLOPs and the median (JSON keeps floats exactly)
# A kernel stopped by the time cap below --min-samples must show this fraction of the cap in its
# samples (the rule stops at twice the cap; loop overhead and calibration are not in the samples).
TIME_CAP_EVIDENCE = 0.9
# A check's tolerance may exceed the bound re-derived from the catalog's kernel by this factor: a
# padded GEMM's reduction is a few elements longer than the catalog's k.
TOLERANCE_SLACK = 1.01
GPU_TIMER_PREFIX = "cuda-"  # kernels/results.py TIMER_METHODS: the GPU timer's strategies
CLOCK_SETTLE = "clock_settle"  # kernels/timing/cuda.py: the samples left out before the clock settled


def check_ok_result(r: KernelResult, plan: Plan | None, add: Add, warn: Add) -> None:
    """Every rule of this module for one `ok` result."""
    check_flags(r, add)
    if "contended" in r.flags:
        warn(
            r.id,
            "contended: other processes held CPUs its threads used while it was measured; its "
            "figure reads slow and is not judged (check --strict refuses it; re-run it on a "
            "quiet machine)",
        )
    if r.check is not None and r.check not in [p.check for p in r.parts]:
        add(r.id, "its check is none of its parts' checks")
    for p in r.parts:
        check_part(r, p, plan, add, warn)
    if r.time_us is not None:
        check_rates(
            r.id,
            "",
            r.tflops,
            r.gbps,
            sum(p.flops for p in r.parts),
            sum(p.min_bytes for p in r.parts),
            r.time_us.median,
            add,
        )


def check_part(r: KernelResult, p: PartResult, plan: Plan | None, add: Add, warn: Add) -> None:
    """One timed direction: its samples, its check, its rates, why it stopped and what stalled."""
    where = f"{p.direction}: "
    check_samples(r, p, plan, add, warn)
    check_passed(r, p.direction, p.check, add)
    check_rates(r.id, where, p.tflops, p.gbps, p.flops, p.min_bytes, p.measurement.stats.median, add)
    check_stalls(r.id, where, p.measurement, add)
    if plan is not None:
        check_stop_reason(r, where, p.measurement, p.info, plan, add)


def check_passed(r: KernelResult, direction: str, check: Check, add: Add) -> None:
    """A passed check with its error within a tolerance no larger than this tool allows."""
    if not check.passed:
        add(r.id, f"{direction}: its check did not pass")
    elif check.error is None or not math.isfinite(check.error) or check.tolerance < 0 or check.error > check.tolerance:
        add(
            r.id,
            f"{direction}: its check passed with error {check.error} against a "
            f"tolerance of {check.tolerance}: a passed check has its error within it",
        )
    elif check.tolerance > (bound := tolerance_bound(r, direction)) * TOLERANCE_SLACK:
        add(
            r.id,
            f"{direction}: its tolerance {check.tolerance:g} is above the {bound:g} "
            f"this tool allows a {r.precision.name.value} {r.op} check",
        )


def check_rates(
    rid: str,
    where: str,
    tflops: float | None,
    gbps: float | None,
    flops: float,
    min_bytes: float,
    median_us: float,
    add: Add,
) -> None:
    """TFLOP/s and GB/s re-derived from the FLOPs, the fewest bytes and the median time (which the
    samples' positivity keeps positive)."""
    if not median_us > 0:
        add(rid, f"{where}its median time {median_us:g} us is not positive: no time is")
        return
    for name, value, derived in (
        ("tflops", tflops, flops / median_us / 1e6),
        ("gbps", gbps, min_bytes / median_us / 1e3),
    ):
        if value is not None and (value or derived) and not math.isclose(value, derived, rel_tol=DERIVED_RTOL):
            add(
                rid,
                f"{where}{name} {value:g} does not follow from its "
                f"{'FLOPs' if name == 'tflops' else 'fewest bytes'} and median time ({derived:g}): "
                "the figures were edited",
            )


def tolerance_bound(r: KernelResult, direction: str) -> float:
    """The largest tolerance this tool gives the check of this kernel's direction (precision.py):
    derived from the recurrence for RNNs and from the reduction for GEMMs; the precision's floor,
    or for convolutions the Winograd/FFT one, for the rest; the whole-model one for models."""
    p = r.precision.name
    k = r.kernel
    rule = traits_of(r.op).tolerance
    if rule is Tolerance.RECURRENCE:
        return recurrence_tolerance(p, k.hidden, k.batch, k.timesteps, direction)
    bound = tolerance(p, reduction=getattr(k, "k", 1) if isinstance(getattr(k, "k", None), int) else 1)
    floor = {Tolerance.TRANSFORM: TRANSFORM_TOLERANCE, Tolerance.WHOLE_MODEL: MODEL_TOLERANCE}.get(rule, {})
    return max(bound, floor.get(p, 0.0))


def check_flags(r: KernelResult, add: Add) -> None:
    """Every flag that follows from the measurements and the timers' notes, there exactly when due."""
    due = set(due_flags(r.parts))
    for flag in FLAG_ORDER:
        if (flag in due) != (flag in r.flags):
            add(
                r.id,
                f"flag {flag!r} is {'missing' if flag in due else 'set'}, but its measurements say "
                f"{'it is' if flag in due else 'it is not'} {flag}",
            )


def check_stalls(rid: str, where: str, m: Measurement, add: Add) -> None:
    """The samples left out of the statistics as stalled are exactly those the stall rule finds."""
    found = stalled_samples(m.samples_us, m.calls_per_sample)
    if tuple(m.stalled) != found:
        add(
            rid,
            f"{where}samples {list(m.stalled)[:10]} are left out of its statistics as stalled, but the stall "
            f"rule (kernels/stalls.py) finds {list(found)[:10]} in its samples",
        )


def check_stop_reason(r: KernelResult, where: str, m: Measurement, info: dict[str, Any], plan: Plan, add: Add) -> None:
    """The stop reason re-derived from the samples with the run's stop rule (stop_replay.py). A GPU
    result that kept throttled samples is not replayed: its rule judged other samples than these (it
    is flagged `throttled`)."""
    notes = info_of(TimerNotes, info) or TimerNotes()
    if notes.throttled_samples_kept:
        return
    rule = stop_rule(plan.settings)
    gpu = m.method.startswith(GPU_TIMER_PREFIX)
    limits: tuple[Stop, ...] = rule.hard_limits if gpu else ()
    repeat = getattr(r.kernel, "repeat", None)
    if traits_of(r.op).collective and isinstance(repeat, int):
        limits = (Stop(REPEAT_COUNT, CallBudget(repeat, m.calls_per_sample)),)  # collectives/common.py
    settle = info.get(CLOCK_SETTLE)
    left_out = settle.get("samples_left_out", 0) if isinstance(settle, dict) else 0
    span = max(0.0, (r.ended_at - r.started_at).total_seconds())
    judged = judged_of(m, span, gpu, every_prefix=not gpu, other_samples=m.discarded + int(left_out or 0))
    why = stop_problem(m.stop_reason, judged, rule.criteria, limits)
    if why is not None:
        add(r.id, f"{where}{why}")


def sampling_seconds(r: KernelResult, p: PartResult) -> float:
    """The seconds the stop rule saw a direction sample for: its samples' sum; for a collective, whose rule
    reads rank 0's clock across the exchange after every sample (collectives/common.py _RankSamples), the
    wall time its timing took where the result records it (info.wall_s: the direction's timing phase, or the
    phase after the parts for the out-of-place twin). Four ranks on two busy CPUs once spent the 0.02 s cap
    with 0.016 s in their samples."""
    m = p.measurement
    spent = sum(m.samples_us) * m.calls_per_sample / 1e6
    recorded = info_of(WallInfo, r.info) if traits_of(r.op).collective else None
    wall = recorded.wall_s if recorded is not None else None
    if wall is None:
        return spent
    if p.direction.startswith("info."):
        timed = wall.after
    else:
        part = wall.parts.get(p.direction)
        timed = part.timing if part is not None else 0.0
    return max(spent, timed) if math.isfinite(timed) else spent


def check_samples(r: KernelResult, p: PartResult, plan: Plan | None, add: Add, warn: Add) -> None:
    """Enough samples: what the run's stop rule requires (--min-samples), checked from the samples
    themselves. The rule stops a kernel too slow for that many samples at twice the time cap:
    then fewer are accepted only if the samples account for at least a time cap, and a warning says
    the figure rests on few samples."""
    m = p.measurement
    n = m.stats.n
    if plan is None or n >= plan.settings.min_samples:
        if n < layout.SUBMISSION_MIN_SAMPLES:
            warn(r.id, f"{p.direction} rests on only {n} sample(s)")
        return
    spent_s = sampling_seconds(r, p)
    if m.stop_reason == "time-cap" and spent_s >= TIME_CAP_EVIDENCE * plan.settings.time_cap_s:
        warn(
            r.id,
            f"{p.direction} rests on {n} sample(s) ({spent_s:.2f} s, stopped at the time cap; "
            f"--min-samples is {plan.settings.min_samples}): a longer --time-cap gives a firmer figure",
        )
    else:
        add(
            r.id,
            f"{p.direction} rests on {n} sample(s) over {spent_s:.3f} s: the run's stop rule needs "
            f"{plan.settings.min_samples}, or a time cap of {plan.settings.time_cap_s:g} s spent",
        )
