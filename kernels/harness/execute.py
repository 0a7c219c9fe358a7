"""Run one plan item: prepare, warm up, measure each direction, check, and build the result.

A kernel that fails its check reports the failure, not a time; any exception becomes a
`failed` result with its reason, so one bad kernel never stops a run."""

from __future__ import annotations

import traceback
from typing import Any

from ..backends.contract.base import Backend, Prepared, TimedPart, Unsupported
from ..backends.contract.declaration import info_of
from ..backends.contract.declared_precisions import refuse_undeclared
from ..backends.contract.dense_info import DenseTwinInfo
from ..backends.contract.model_info import ModelRunInfo
from ..inputs import drawn_for, poison, zero_input_check
from ..noise import CpuWindow
from ..padding import PadMode
from ..precision import PRECISIONS
from ..result_flags import due_flags
from ..results import Check, KernelResult, PartResult, PlanItem, Settings, Status, TimeStats, utcnow
from ..timing.cpu import METHOD as CPU_TIMER
from ..timing.stopping import StopRule
from .padding_info import PaddingInfo
from .wall_info import AFTER, CHECK, FIRST_CALL, PREPARE, TIMING, Stopwatch

US_PER_S = 1e6


def stop_rule(settings: Settings) -> StopRule:
    return StopRule(
        settings.target_rel_precision,
        settings.min_samples,
        settings.max_samples,
        settings.time_cap_s,
        settings.min_time_s,
        settings.limited_min_time_s,
        settings.calm_min_time_s,
    )


def _base(item: PlanItem, backend: Backend, started: Any) -> dict[str, Any]:
    return dict(
        id=item.id,
        kernel=item.kernel,
        precision=PRECISIONS[item.precision],
        backend=backend.backend_for(item.kernel, item.precision),
        library=backend.library_versions(),
        inputs=drawn_for(backend.settings.inputs, item.precision),
        started_at=started,
    )


def run_item(backend: Backend, item: PlanItem, settings: Settings) -> KernelResult:
    started = utcnow()
    base = _base(item, backend, started)
    rule = stop_rule(settings)
    watch = Stopwatch()
    try:
        refuse_undeclared(item.precision, backend.backend_for(item.kernel, item.precision))
        with watch.phase(PREPARE):
            prepared = backend.prepare(item.kernel, item.precision)
        parts, failed = _measure(backend, prepared, rule, base["inputs"] == "zeros", watch)
        if failed is not None:
            part, check = failed
            return KernelResult(
                **base,
                status=Status.FAILED,
                check=check,
                padding=prepared.padding,
                reason=f"{part.direction}: check failed ({check.method}: error {check.error} "
                f"> tolerance {check.tolerance}) {check.detail}".strip(),
                info={"wall_s": watch.wall_seconds().model_dump()},
                ended_at=utcnow(),
            )
        info = dict(prepared.info)
        with watch.phase(AFTER):
            if prepared.after is not None:
                info.update(prepared.after(backend, rule))
            if settings.pad == PadMode.BOTH.value and prepared.padding:
                info["unpadded"] = _unpadded(backend, item, rule)
        info["wall_s"] = watch.wall_seconds().model_dump()
        return finish(base, parts, prepared.padding, info)
    except Unsupported as exc:
        return KernelResult(**base, status=Status.UNSUPPORTED, reason=str(exc), ended_at=utcnow())
    except MemoryError:
        return KernelResult(**base, status=Status.FAILED, reason="out of host memory", ended_at=utcnow())
    except Exception as exc:  # noqa: BLE001 - any library error becomes this kernel's failure
        return failed_result(backend, item, exc, started)
    finally:
        backend.release()


def failed_result(backend: Backend, item: PlanItem, exc: Exception, started: Any = None) -> KernelResult:
    """`item`'s `failed` result from the exception that ended it: its type and message as the reason,
    the traceback in the info (also for what befalls a kernel before it runs: a rank gone at its barrier)."""
    reason = f"{type(exc).__name__}: {exc}".strip()
    if "out of memory" in reason.lower():
        reason = f"out of device memory: {reason}"
    return KernelResult(
        **_base(item, backend, started or utcnow()),
        status=Status.FAILED,
        reason=reason[:2000],
        info={"traceback": traceback.format_exc(limit=6)[-4000:]},
        ended_at=utcnow(),
    )


def _measure(
    backend: Backend, prepared: Prepared, rule: StopRule, zeros: bool, watch: Stopwatch
) -> tuple[list[PartResult], tuple[TimedPart, Check] | None]:
    """Warm up, time and check each direction; stops at the first failed check (returned).
    `zeros`: the inputs are all zero, so the output is poisoned before one more call and the check
    says it is trivial (kernels/inputs.py). `watch` gets each direction's seconds."""
    parts: list[PartResult] = []
    for part in prepared.parts:
        with watch.phase(FIRST_CALL, part.direction):
            part.run()  # first call: warm-up, library handle and algorithm selection
        window = CpuWindow() if backend.settings.device == "cpu" else None
        with watch.phase(TIMING, part.direction):
            measurement = part.timer(part.run, rule) if part.timer else backend.measure(part.run, rule, part)
        if window is not None and measurement.method == CPU_TIMER:  # who else held the CPUs meanwhile
            spare = max(0, len(window.cpus) - (backend.cpu_threads() or len(window.cpus)))
            measurement = measurement.model_copy(update={"others_cores": window.others_cores(), "spare_cores": spare})
        with watch.phase(CHECK, part.direction):
            poisoned = zeros and poison(part.output)
            if poisoned:
                part.run()
            check = part.check()  # the outputs the last timed call wrote
        if zeros:
            check = zero_input_check(check, poisoned)
        if not check.passed:
            return parts, (part, check)
        seconds = measurement.stats.median / US_PER_S
        if measurement.energy is not None:  # --energy: the part's work per joule
            measurement = measurement.model_copy(
                update={"energy": measurement.energy.rated(part.flops, part.min_bytes)}
            )
        parts.append(
            PartResult(
                direction=part.direction,
                measurement=measurement,
                flops=part.flops,
                min_bytes=part.min_bytes,
                check=check,
                tflops=part.flops / seconds / 1e12 if part.flops else None,
                gbps=part.min_bytes / seconds / 1e9,
                info=part.info,
            )
        )
    return parts, None


def _unpadded(backend: Backend, item: PlanItem, rule: StopRule) -> dict[str, Any]:
    """--pad both: the kernel at its listed shape, measured and checked as the padded one was."""
    raw = backend.prepare_unpadded(item.kernel, item.precision)
    if raw is None:
        return {"note": f"the {backend.backend_for(item.kernel, item.precision)} backend does not pad"}
    zeros = drawn_for(backend.settings.inputs, item.precision) == "zeros"
    parts, failed = _measure(backend, raw, rule, zeros, Stopwatch())  # its seconds count in the kernel's `after`
    if failed is not None:
        part, check = failed
        return {"failed": f"{part.direction}: check failed (error {check.error} > tolerance {check.tolerance})"}
    return {
        "time_us": TimeStats.total(p.measurement.stats for p in parts).model_dump(),
        "parts": {p.direction: p.measurement.stats.median for p in parts},
        "check": max((p.check for p in parts), key=lambda c: c.error or 0.0).model_dump(),
    }


def derived_figures(info: dict[str, Any], median_us: float) -> dict[str, float]:
    """What the result's median makes of the info its writers recorded, in the order they are added:
    --pad both's raw over padded time (DeepBench's alignment penalty), a sparse GEMM's speed-up over
    its dense twin, a whole model's inputs (images, sequences) per second."""
    padding = info_of(PaddingInfo, info)
    dense = info_of(DenseTwinInfo, info)
    model = info_of(ModelRunInfo, info)
    derived = {
        "alignment_penalty": padding.penalty(median_us) if padding else None,
        "speedup_vs_dense": dense.speedup(median_us) if dense else None,
        "throughput_per_s": model.throughput(median_us / US_PER_S) if model else None,
    }
    return {key: value for key, value in derived.items() if value is not None}


def finish(
    base: dict[str, Any], parts: list[PartResult], padding: dict[str, int], info: dict[str, Any]
) -> KernelResult:
    total = TimeStats.total(p.measurement.stats for p in parts)
    seconds = total.median / US_PER_S
    flops = sum(p.flops for p in parts)
    flags = due_flags(parts)  # every flag, from the measurements and the timers' notes (result_flags.py)
    info.update(derived_figures(info, total.median))
    worst = max(parts, key=lambda p: p.check.error or 0.0).check
    return KernelResult(
        **base,
        status=Status.OK,
        time_us=total,
        tflops=flops / seconds / 1e12 if flops else None,
        gbps=sum(p.min_bytes for p in parts) / seconds / 1e9,
        check=worst,
        parts=tuple(parts),
        padding=padding,
        flags=flags,
        info=info,
        ended_at=utcnow(),
    )
