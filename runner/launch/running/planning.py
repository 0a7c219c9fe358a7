"""A plan's items: the selected kernels, each in the precisions asked for or the platform's.

Kept apart from the `deepbench-run` command (runner/launch/running/run.py, request.py) because the submission checker
re-derives a plan's items the same way (`declared_items`) and must not load a command-line
module to do so."""

from __future__ import annotations

from collections.abc import Sequence

from deepbench.kernels.catalog import Kernel, traits_of
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Plan, PlanItem
from deepbench.kernels.suites import SelectionError

from ...platforms import Platform, get_platform
from ...selection import KernelSelection


def default_precisions(kernels: Sequence[Kernel], platform: Platform) -> dict[str, tuple[str, ...]]:
    """The platform's precisions for each '<set>/<op>' of the selection (Selection.default_precisions)."""
    return {f"{k.set}/{k.op}": platform.precisions_for(k.set, k.op) for k in kernels}


def plan_items(
    kernels: Sequence[Kernel],
    precisions: Sequence[Precision | str] | None,
    platform: Platform,
    defaults: dict[str, tuple[str, ...]] | None = None,
) -> list[PlanItem]:
    """One item per kernel and precision: `precisions` if given, else the recorded `defaults`
    (a plan's), else the platform's."""
    items: list[PlanItem] = []
    for k in kernels:
        recorded = (defaults or {}).get(f"{k.set}/{k.op}")
        chosen = [Precision(p) for p in precisions or recorded or platform.precisions_for(k.set, k.op)]
        fixed = traits_of(k.op).fixed_precision  # all-reduce: float32 elements, whatever the run asks
        if fixed:
            chosen = [Precision(fixed)]
        items.extend(PlanItem(kernel=k, precision=p) for p in dict.fromkeys(chosen))
    return items


def declared_items(plan: Plan) -> list[PlanItem]:
    """The kernels the plan's suite and selection stand for, by this tool's frozen suites (the
    submission checker's view of the plan's scope). Raises SelectionError or UserError when the
    selection or the platform is not valid here."""
    selection = KernelSelection.from_plan(plan)
    defaults = plan.selection.default_precisions if plan.selection else None
    platform = get_platform(plan.platform)
    try:
        return plan_items(selection.kernels, selection.precisions, platform, defaults)
    except SelectionError:
        raise
    except ValueError as exc:  # a recorded default precision this tool does not know
        raise SelectionError(f"its recorded precisions are not valid here: {exc}") from None
