"""What `deepbench check` recomputes instead of trusting (issue 42): a result's FLOPs and fewest
bytes from its kernel's parameters with the tool's own cost formulas (kernels/costs.py, through
each operation's class), the directions its backend times (each exactly once), a check's error
(non-negative), its labels (closed sets), the reason of an `unsupported` result (one its backend's
declaration says can apply to that kernel and precision on the run's device: `may_refuse`,
kernels/backends/contract/declaration.py) and the run's settings (the ranges the command line accepts:
runner/setting_ranges.py). A forger who keeps the manifest, the rates and the counts consistent still
cannot double a kernel's FLOPs, drop its backward passes or blank it out."""

from __future__ import annotations

import math
from collections.abc import Callable

from ...kernels.backends.contract.timed_directions import counted_costs, timed_directions
from ...kernels.backends.contract.unsupported_reasons import can_refuse
from ...kernels.precision import Precision
from ...kernels.results import (
    CHECK_METHODS,
    RESULT_FLAGS,
    STOP_REASONS,
    TIMER_METHODS,
    KernelResult,
    PartResult,
    Plan,
    Status,
)
from ..setting_ranges import out_of_range
from . import published_ok

# FLOPs and bytes are computed in float64 from integers: the harness's figure and ours agree to
# the last bits; this leaves room for a JSON round trip and nothing a forger could use.
COST_RTOL = 1e-9

Add = Callable[[str, str], None]
DEFAULT_DEVICE = "cpu"  # Settings.device's default: what a result judged without its plan ran on


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=COST_RTOL, abs_tol=0.0)


def check_result(r: KernelResult, plan: Plan | None, add: Add) -> None:
    """Every rule of this module for one result."""
    for flag in r.flags:
        if flag not in RESULT_FLAGS:
            add(r.id, f"flag {flag!r} is not one this tool sets ({', '.join(RESULT_FLAGS)})")
    device = plan.settings.device if plan is not None else DEFAULT_DEVICE
    if r.status is Status.UNSUPPORTED:
        if r.parts or r.time_us is not None:
            add(r.id, "is unsupported but holds measurements")
        if not can_refuse(r.backend, r.kernel, r.precision.name, r.reason, device):
            add(
                r.id,
                f"unsupported with a reason backend {r.backend!r} cannot give for this {r.precision.name.value} "
                f"{r.op} kernel ({r.reason[:120]!r}): its code raises no such reason where this kernel goes",
            )
        return
    _check_directions(r, device, add)
    for p in r.parts:
        _check_part(r, p, device, add)


def _check_directions(r: KernelResult, device: str, add: Add) -> None:
    if not r.parts:
        return
    names = [p.direction for p in r.parts]
    required, allowed = timed_directions(r.kernel, r.precision.name.value, r.backend, device, r.info)
    for d in sorted(set(names)):
        if names.count(d) > 1:
            add(r.id, f"direction {d!r} is timed {names.count(d)} times: each direction is timed once")
    unknown = [d for d in names if d not in allowed]
    if unknown:
        add(r.id, f"directions {unknown} are not among those its backend times for a {r.op} kernel ({list(allowed)})")
    missing = sorted(required - set(names))
    if missing:
        add(
            r.id,
            f"lacks the direction(s) {missing}: backend {r.backend!r} times {sorted(required)} for this "
            f"{r.precision.name.value} {r.op} kernel, and its time is their sum",
        )


def _check_part(r: KernelResult, p: PartResult, device: str, add: Add) -> None:
    m = p.measurement
    if m.method not in TIMER_METHODS:
        add(r.id, f"{p.direction}: timer {m.method!r} is not one this tool has ({', '.join(TIMER_METHODS)})")
    if m.stop_reason not in STOP_REASONS:
        add(r.id, f"{p.direction}: stop reason {m.stop_reason!r} is not one this tool gives")
    if p.check.method not in CHECK_METHODS:
        add(r.id, f"{p.direction}: check method {p.check.method!r} is not one this tool has")
    if p.check.error is not None and p.check.error < 0:
        add(r.id, f"{p.direction}: its check error {p.check.error:g} is negative: an error is a norm")
    check_part_costs(r, p, device, add)


def check_part_costs(r: KernelResult, p: PartResult, device: str, add: Add, where: str = "") -> None:
    """The part's FLOPs and fewest bytes against what the kernel's parameters give (kernels/costs.py)."""
    where = where or f"{p.direction}: "
    try:
        costs = counted_costs(r.kernel, Precision(r.precision.name.value), p.direction, r.backend, device)
    except (KeyError, ValueError, TypeError, NotImplementedError):
        return  # a direction the kernel has no formula for is reported by _check_directions
    if not any(_close(p.flops, f) for f, _ in costs):
        add(r.id, f"{where}{p.flops:g} FLOPs is not what its parameters give ({costs[0][0]:g}, kernels/costs.py)")
    if not any(_close(p.min_bytes, b) for _, b in costs):
        add(
            r.id,
            f"{where}{p.min_bytes:g} fewest bytes is not what its parameters give ({costs[0][1]:g}, kernels/costs.py)",
        )


def check_settings(plan: Plan, add: Add, where: str, cpus: int | None = None) -> None:
    """The run's settings within the ranges the command line accepts (`cpus`: the submitting
    machine's usable CPUs, which bound --threads there)."""
    for problem in out_of_range(plan.settings, cpus=cpus):
        add(where, f"settings: {problem} (the range deepbench-run accepts)")


def ran_before(platform: str, backend: str) -> dict[str, str]:
    """Kernel ids (op/set/index/precision) a published run of this tool on `platform` with
    `backend` measured `ok`, each with the run it was in: a result `unsupported` on such a platform
    is suspect (check --strict refuses it). Read from the index the package ships
    (published_ok.py), never from runner/published, which only a source checkout holds."""
    return published_ok.shipped().get(platform, {}).get(backend, {})


def unsupported_but_ran(r: KernelResult, plan: Plan) -> str | None:
    """The published run in which this unsupported result's kernel ran `ok` on the same platform."""
    if r.status is not Status.UNSUPPORTED:
        return None
    return ran_before(plan.platform, plan.backend).get(f"{r.kernel.id}/{r.precision.name.value}")
