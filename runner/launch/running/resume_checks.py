"""What --resume accepts of the command line: the plan and how it runs are fixed when the run starts,
so every option the command line names (the request's `explicit`) must agree with the plan, and the
run's launch (local or container) is the one it recorded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepbench.kernels.results import Plan, RunRecord

from ...backend_options import option_conflicts
from ...errors import UserError
from ..images.container_options import CONTAINER_ONLY

if TYPE_CHECKING:
    from .request import RunRequest

LEGACY_LOCAL_MARKER = ".local"  # how folders made before run.json recorded it said --local
OPTION_NAMES = {"mode": "--fast/--rigorous", "kernel_time": "--kernel-time/--no-kernel-time"}


def launch_mode(outdir: Path, prior: RunRecord | None, request: RunRequest, launch: str | None) -> bool:
    """Local or container, as the run recorded it (or an older folder's marker)."""
    if prior is not None and prior.provenance.local is not None:
        return prior.provenance.local
    marker = outdir / LEGACY_LOCAL_MARKER
    if marker.is_file():
        return marker.read_text().strip() == "1"
    if "local" in request.explicit:
        return request.local
    if launch:  # a cluster's engine starts the ranks on its nodes (launch-command's plan)
        return True
    if "platform" in request.explicit:
        return False
    raise UserError(
        f"{outdir} does not say whether it ran locally or in a container (no run.json): resume with "
        "--local, or with --platform P for a container"
    )


def _plan_values(plan: Plan) -> dict[str, Any]:
    """Options that define the plan: dest -> how the plan holds it."""
    s, sel = plan.settings, plan.selection
    return {
        "suite": plan.suite,
        "platform": plan.platform,
        "backend": plan.backend,
        "ops": sel.ops if sel else None,
        "where": sel.where if sel else (),
        "limit": sel.limit if sel else None,
        "precision": sel.precisions if sel else None,
        "batch": sel.batch if sel else None,
        "seq": sel.seq if sel else None,
        "mode": s.mode,
        "time_cap": s.time_cap_s,
        "target": s.target_rel_precision,
        "warm_up": s.warm_up_s,
        "kernel_timeout": s.kernel_timeout_s,
        "threads": s.threads,
        "seed": s.seed,
        "cold": s.cold,
        "verify_timing": s.verify_timing,
        "kernel_time": s.kernel_time,
        "ranks": s.ranks,
        "inputs": s.inputs,
        "energy": s.energy,
        "energy_window": s.energy_window_s,
        "lock_clocks": s.lock_clocks,
    }


def _given(dest: str, request: RunRequest) -> Any:
    """What the request asks for under an option's dest, as the plan would hold it."""
    sel = request.selection
    selected = {
        "suite": sel.suite,
        "ops": sel.ops,
        "where": sel.where,
        "limit": sel.limit,
        "precision": tuple(p.value for p in sel.precisions) if sel.precisions else None,
        "batch": sel.batch,
        "seq": sel.seq,
        "platform": request.platform.name if request.platform else None,
        "backend": request.backend,
        "ranks": request.ranks,
    }
    return selected[dest] if dest in selected else getattr(request.measurement, dest)


def _flag(dest: str) -> str:
    return OPTION_NAMES.get(dest, "--" + dest.replace("_", "-"))


def conflicts(request: RunRequest, plan: Plan, local: bool, outdir: Path) -> list[str]:
    """What the options given with --resume would change about the run (nothing may change)."""
    out = []
    planned = _plan_values(plan)
    explicit = request.explicit
    for dest in sorted(explicit & set(planned)):
        given = _given(dest, request)
        if given != planned[dest]:
            shown = repr(planned[dest]) if planned[dest] not in (None, ()) else "default"
            out.append(f"{_flag(dest)} {given!r} differs from the run's {shown}")
    out += option_conflicts(request.backend_options, plan.settings)
    if "local" in explicit and request.local and not local:
        out.append("--local was given, but the run ran in a container")
    if local:
        out += [
            f"{_flag(d)} applies to container runs, and this run ran locally" for d in CONTAINER_ONLY if d in explicit
        ]
    given_out = request.results.out
    if "out" in explicit and given_out is not None and given_out.resolve() != outdir.resolve():
        out.append(f"--out {given_out} is not the resumed folder")
    return out
