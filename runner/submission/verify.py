"""`deepbench verify`: re-run a submission's plan and compare every kernel with the submitted numbers.

The bundle must first pass `deepbench check`. Its plan.json is run again exactly (same kernels,
precisions, settings and seed) on this machine, by code the verifier trusts: in a container on
the verifier's own image (the platform's image built here from this tool's recipe, or --image REF
built here: proven by the id this machine recorded when it built it and by the harness read out of
it unstarted, never by its labels; never the image the bundle names, which is the submitter's code:
runner/launch/images/own_images.py), or with --local in a subprocess of this installation (the only
way for a --local submission; settings outside deepbench-run's ranges are refused). The image is
proven, and --out checked, before the re-run's folder is made. Then, per kernel:

  ratio      = re-run median / submitted median
  noise      = sqrt(rel_iqr_submitted^2 + rel_iqr_rerun^2)      (rel_iqr = (p75 - p25) / median)
  tolerance  = min(cap, max(floor, k * noise))                   (defaults: floor 10%, k 3, cap 100%)
  agree      iff max(ratio, 1/ratio) - 1 <= tolerance
  unverifiable iff noise > the noise limit                       (default 15%: tolerance at most 45%)

so a quiet kernel must agree within the floor, a noisy one gets room in proportion to the noise
both runs measured, and a kernel too noisy for any tolerance to mean something is reported
`unverifiable`, never `agree`: with its tolerance near the cap, a number altered by half would
pass. Before judging, every kernel that did not agree or whose re-run was noisy is measured once
more with longer samples and a longer time cap (jitter averages out over more calls per sample;
a busy moment passes), and the quieter of its two re-runs is the one compared. A kernel
`unsupported` in both agrees; one that is `ok` in one run and not in the other disagrees; one
flagged `contended` (other processes held its CPUs) in either run is `unverifiable`, not judged.
"""

from __future__ import annotations

import math
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final, Literal, TypedDict

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.markup import escape

from ...kernels.harness.record import build_record, read_facts, write_record
from ...kernels.results import RESULTS_FILE, KernelResult, RunRecord, Settings, Status, TimeStats
from ...kernels.results_file import read_results, write_atomic
from ...kernels.system import SystemDescription
from ..backend_options import replayed
from ..errors import UserError
from ..launch.running import run_folder
from ..launch.running.local import LocalHarness
from ..launch.running.provenance import command_line, with_host_facts
from ..launch.running.run_folder import RunFolder
from ..launch.running.signals import Stopped
from ..launch.running.supervise import supervise
from ..option_types import usable_cpus
from ..platforms import get_platform
from ..render.display import RunProgress
from ..setting_ranges import out_of_range
from . import layout
from .checker import Bundle, check_bundle
from .layout import SubmissionIndex
from .show import print_report

VERIFY_SCHEMA: Final = "deepbench.verify/1"
DEFAULT_FLOOR = 0.10
DEFAULT_NOISE_FACTOR = 3.0
DEFAULT_CAP = 1.0
# Above this combined relative IQR a kernel is unverifiable: k x 15% = 45%, the widest tolerance a
# verdict may rest on by default (a 50% alteration must not pass as noise).
DEFAULT_MAX_NOISE = 0.15
REPORT_FILE = "verify.json"
CONTENDED = "contended"  # the result flag (kernels/harness/execute.py): not judged
DEFAULT_VERIFY_DIR = Path("deepbench-verify")
REMEASURE_DIR = "remeasure"
REMEASURE_FACTOR = 4.0  # the second measurement's samples and time cap, against the plan's
NOISY_RERUN = 0.10  # a re-run noisier than this (relative IQR) is measured again before judging
VERIFY_FILES = frozenset({REPORT_FILE, REMEASURE_DIR})  # what verify writes beside the re-run's own files
# The starter of the re-run's harness containers on a plan in its folder (None: --local).
ContainerFor = Callable[[Path, Path], Callable[[], Any]]


@dataclass(frozen=True)
class ToleranceRule:
    floor: float = DEFAULT_FLOOR
    noise_factor: float = DEFAULT_NOISE_FACTOR
    cap: float = DEFAULT_CAP
    max_noise: float = DEFAULT_MAX_NOISE

    def tolerance(self, a: TimeStats, b: TimeStats) -> float:
        noise = math.hypot(a.rel_iqr, b.rel_iqr)
        return min(self.cap, max(self.floor, self.noise_factor * noise)) if math.isfinite(noise) else self.cap


class Comparison(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    verdict: Literal["agree", "disagree", "unverifiable"]
    submitted_us: float | None = None
    rerun_us: float | None = None
    ratio: float | None = None
    tolerance: float | None = None
    noise: float | None = None
    remeasured: bool = False
    reason: str = ""


class VerifyReport(BaseModel):
    schema_version: Literal["deepbench.verify/1"] = VERIFY_SCHEMA
    bundle: str
    rerun: str
    local: bool
    rule: dict[str, float]
    agree: int
    disagree: int
    unverifiable: int = 0
    environment_differences: list[str]
    comparisons: list[Comparison]


class _Figures(TypedDict):
    """What every comparison of two timed results reports, whatever its verdict."""

    submitted_us: float
    rerun_us: float
    ratio: float
    noise: float | None
    remeasured: bool


def compare(
    submitted: list[KernelResult],
    rerun: list[KernelResult],
    rule: ToleranceRule,
    remeasured: frozenset[str] | set[str] = frozenset(),
) -> list[Comparison]:
    again = {r.id: r for r in rerun}
    out = []
    for s in submitted:
        r = again.get(s.id)
        if r is None:
            out.append(Comparison(id=s.id, verdict="disagree", reason="not re-run (the re-run stopped early)"))
        elif CONTENDED in s.flags or CONTENDED in r.flags:
            where = "the submission" if CONTENDED in s.flags else "this re-run"
            out.append(
                Comparison(
                    id=s.id,
                    verdict="unverifiable",
                    reason=(
                        f"contended in {where}: other processes held CPUs its threads used, so its time says little; "
                        "not judged (re-run on a quiet machine, or with --threads 1 in both)"
                    ),
                    submitted_us=s.time_us.median if s.time_us else None,
                    rerun_us=r.time_us.median if r.time_us else None,
                    remeasured=s.id in remeasured,
                )
            )
        elif s.status is Status.OK and r.status is Status.OK and s.time_us and r.time_us:
            ratio = r.time_us.median / s.time_us.median
            noise = math.hypot(s.time_us.rel_iqr, r.time_us.rel_iqr)
            tol = rule.tolerance(s.time_us, r.time_us)
            off = max(ratio, 1 / ratio) - 1 if ratio > 0 else math.inf
            figures = _Figures(
                submitted_us=s.time_us.median,
                rerun_us=r.time_us.median,
                ratio=ratio,
                noise=noise if math.isfinite(noise) else None,
                remeasured=s.id in remeasured,
            )
            if not noise <= rule.max_noise:
                out.append(
                    Comparison(
                        id=s.id,
                        verdict="unverifiable",
                        **figures,
                        reason=(
                            f"too noisy to verify: combined relative IQR {noise:.0%} is over the limit of "
                            f"{rule.max_noise:.0%} (submitted {s.time_us.rel_iqr:.0%}, here {r.time_us.rel_iqr:.0%}); "
                            "re-run on a quiet machine"
                        ),
                    )
                )
            else:
                reason = "" if off <= tol else f"differs by {off:.0%}, over the tolerance of {tol:.0%}"
                out.append(
                    Comparison(
                        id=s.id, verdict="agree" if off <= tol else "disagree", tolerance=tol, **figures, reason=reason
                    )
                )
        elif s.status is r.status is Status.UNSUPPORTED:
            out.append(Comparison(id=s.id, verdict="agree", reason="unsupported in both"))
        else:
            out.append(
                Comparison(
                    id=s.id,
                    verdict="disagree",
                    reason=f"{s.status.value} in the submission, "
                    f"{r.status.value} here{': ' + r.reason[:200] if r.reason else ''}",
                )
            )
    return out


def to_remeasure(comparisons: list[Comparison], rerun: list[KernelResult]) -> list[str]:
    """Kernels measured once more before judging: those that did not agree, and noisy re-runs."""
    again = {r.id: r for r in rerun}
    out = []
    for c in comparisons:
        r = again.get(c.id)
        if r is None or r.status is not Status.OK or r.time_us is None:
            continue
        if c.verdict != "agree" or r.time_us.rel_iqr > NOISY_RERUN or CONTENDED in r.flags:
            out.append(c.id)
    return out


def quieter(first: list[KernelResult], second: list[KernelResult]) -> list[KernelResult]:
    """Per kernel, the re-run with the smaller relative IQR (a second one that did not finish ok
    does not replace an ok first)."""
    better = {r.id: r for r in second if r.status is Status.OK and r.time_us is not None}
    out = []
    for r in first:
        b = better.get(r.id)
        if b is not None and CONTENDED in r.flags and CONTENDED not in b.flags:
            out.append(b)  # an uncontended second measurement beats a contended first, however quiet
            continue
        # b.time_us is set (`better` holds only those); said again for the type checker
        out.append(
            b
            if b is not None and b.time_us is not None and (r.time_us is None or b.time_us.rel_iqr < r.time_us.rel_iqr)
            else r
        )
    return out


def judge(
    submitted: list[KernelResult],
    rerun: list[KernelResult],
    rule: ToleranceRule,
    remeasure: Callable[[list[str]], list[KernelResult]],
) -> list[Comparison]:
    """Compare; measure again what did not agree or was noisy; compare with the quieter re-run."""
    first = compare(submitted, rerun, rule)
    ids = to_remeasure(first, rerun)
    if not ids:
        return first
    return compare(submitted, quieter(rerun, remeasure(ids)), rule, remeasured=set(ids))


def environment_differences(submitted: SystemDescription | None, here: SystemDescription | None) -> list[str]:
    """What differs between the submission's system and the re-run's (numbers need not agree then)."""
    if submitted is None or here is None:
        return ["a system description is missing"]
    a, b = submitted.measured, here.measured
    out = []
    if a.cpu.model != b.cpu.model:
        out.append(f"CPU: {a.cpu.model} there, {b.cpu.model} here")
    if [x.name for x in a.accelerators] != [x.name for x in b.accelerators]:
        out.append(f"accelerators: {[x.name for x in a.accelerators]} there, {[x.name for x in b.accelerators]} here")
    if a.libraries != b.libraries:
        out.append(f"libraries: {a.libraries} there, {b.libraries} here")
    return out


def _own_container(platform: str, console: Console, image: str | None) -> ContainerFor:
    """How the re-runs start their containers: on the verifier's own image, proven before any folder
    is made (the platform's image this machine built from this tool's recipe, built when missing, or
    the one --image names, present here): a hard refusal otherwise, with no --force-image. The image
    the bundle names is never pulled, loaded or run (it is the submitter's code)."""
    try:
        from ..launch.images import container
    except ImportError as exc:
        raise UserError(f"this installation cannot run containers ({exc}): verify with --local") from None

    def log(line: str) -> None:
        console.print(line, highlight=False, markup=False)

    where = get_platform(platform)
    chosen = container.own_image(where, image, log)
    return lambda plan_path, outdir: container.start_in(chosen, plan_path, outdir, where)


def image_difference(index: SubmissionIndex, ours: dict[str, Any] | None) -> str | None:
    """The submission's image against the verifier's, by id: a difference is reported (the numbers
    then come from different builds of the same recipe, or from an image that is not this tool's)."""
    theirs = index.image.id if index.image is not None else index.image_digest
    mine = (ours or {}).get("id")
    if theirs is None or mine is None or theirs == mine:
        return None
    return (
        f"image: the submission ran in {theirs[:19]}, this verifier re-ran in its own {mine[:19]} (built from "
        f"this tool's recipe); the submission's image was not run"
    )


def verify_bundle(
    root: Path,
    *,
    local: bool,
    out: Path | None,
    rule: ToleranceRule,
    console: Console,
    quiet: bool = False,
    image: str | None = None,
    allow_modified: bool = False,
) -> VerifyReport:
    if out is not None:
        run_folder.check_place(out, VERIFY_FILES)  # before the bundle is read or an image built
    bundle, submitted = _checked_bundle(root, local, console, allow_modified)
    assert bundle.plan is not None and bundle.index is not None  # _checked_bundle's
    stamp = f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    outdir = out or DEFAULT_VERIFY_DIR / f"{bundle.plan.run_id}-{stamp}"
    # The very choices the submission's backends made (its results name them, e.g. a library's
    # engine), not fresh ones.
    settings = replayed(bundle.plan.settings, submitted)
    plan = bundle.plan.model_copy(
        update={"run_id": f"{bundle.plan.run_id}-verify-{stamp}", "command": command_line(), "settings": settings}
    )
    container_for = None if local else _own_container(plan.platform, console, image)
    folder = run_folder.create(outdir, plan, local, role="deepbench verify", resume_hint=False, also=VERIFY_FILES)
    console.print(
        f"[bold]deepbench verify[/] re-running {len(plan.items)} kernels of {escape(bundle.plan.run_id)} "
        f"({'local' if local else 'container'}) -> {escape(str(outdir))}",
        highlight=False,
    )
    record, rerun = _rerun(folder, container_for, console, quiet)

    def remeasure(ids: list[str]) -> list[KernelResult]:
        console.print(
            f"measuring {len(ids)} kernel(s) again with {REMEASURE_FACTOR:g}x longer samples before "
            "judging (they did not agree, or their re-run was noisy)",
            highlight=False,
        )
        again = plan.model_copy(
            update={
                "run_id": f"{plan.run_id}-{REMEASURE_DIR}",
                "settings": longer(plan.settings),
                "items": tuple(i for i in plan.items if i.id in set(ids)),
            }
        )
        sub = run_folder.create(outdir / REMEASURE_DIR, again, local, role="deepbench verify", resume_hint=False)
        return _rerun(sub, container_for, console, quiet)[1]

    comparisons = judge(submitted, rerun, rule, remeasure)
    differences = environment_differences(bundle.system, record.system)
    if not local:
        differences += filter(None, [image_difference(bundle.index, record.provenance.image)])
    result = _report(root, outdir, local, rule, comparisons, differences)
    write_atomic(outdir / REPORT_FILE, result.model_dump_json(indent=1) + "\n")
    return result


def _checked_bundle(
    root: Path, local: bool, console: Console, allow_modified: bool
) -> tuple[Bundle, list[KernelResult]]:
    """The bundle and its results, when it passes `deepbench check` and can be re-run here as it ran."""
    report = check_bundle(root, allow_modified=allow_modified)
    if not report.ok:
        print_report(console, report)
        raise UserError("verify needs a bundle that passes deepbench check (see the problems above)", exit_code=1)
    bundle = report.bundle
    assert bundle.plan is not None and bundle.run is not None and bundle.index is not None
    submitted = read_results(root / layout.RESULTS)  # checked above; verify compares every one
    if not local and bundle.index.local:
        raise UserError("this submission was run with --local (no container image): verify it with --local")
    if local:
        problems = out_of_range(bundle.plan.settings, cpus=usable_cpus())
        if problems:
            raise UserError(
                f"the bundle's run settings are outside what deepbench-run accepts here "
                f"({'; '.join(problems)}): not re-run"
            )
    return bundle, submitted


def _report(
    root: Path, outdir: Path, local: bool, rule: ToleranceRule, comparisons: list[Comparison], differences: list[str]
) -> VerifyReport:
    count = Counter(c.verdict for c in comparisons)
    return VerifyReport(
        bundle=str(root),
        rerun=str(outdir),
        local=local,
        rule=vars(rule).copy(),
        agree=count["agree"],
        disagree=count["disagree"],
        unverifiable=count["unverifiable"],
        environment_differences=differences,
        comparisons=comparisons,
    )


def longer(settings: Settings) -> Settings:
    """The plan's settings with samples and time cap REMEASURE_FACTOR times longer (and the whole floor on a
    calm GPU too)."""
    cap = settings.time_cap_s * REMEASURE_FACTOR
    return settings.model_copy(
        update={
            "time_cap_s": cap,
            "min_sample_s": settings.min_sample_s * REMEASURE_FACTOR,
            "min_time_s": settings.min_time_s * REMEASURE_FACTOR,
            "calm_min_time_s": None,  # the whole floor: a second look takes no shortcut
            "kernel_timeout_s": max(settings.kernel_timeout_s, cap * REMEASURE_FACTOR * 3),
        }
    )


def _rerun(
    folder: RunFolder, container_for: ContainerFor | None, console: Console, quiet: bool
) -> tuple[RunRecord, list[KernelResult]]:
    """Run a plan in its folder to the end (or the user's stop), in a container on the verifier's own
    image unless the folder is local; its record and results."""
    plan, outdir = folder.plan, folder.path
    start: Callable[[], Any]
    if folder.local:
        start = lambda: LocalHarness(folder.plan_path, outdir)  # noqa: E731 - the supervisor's starter
    else:
        assert container_for is not None  # made, and its image proven, for every container verify
        start = container_for(folder.plan_path, outdir)
    with RunProgress(console, total=len(plan.items)) as progress:
        if quiet:
            progress.finished = lambda event: progress.bar.advance(progress.task)  # type: ignore[method-assign]
        outcome = supervise(plan, outdir, start, progress)
    facts = with_host_facts(read_facts(outdir), plan, folder.local)
    provenance = getattr(start, "provenance", None)  # a container starter's image, where there is one
    if not folder.local and provenance:
        facts["provenance"]["image"] = provenance
    record = build_record(plan, outdir, outcome.state, folder.started_at, facts)
    record = run_folder.finish(folder, record, record.state)
    write_record(outdir, record)
    if outcome.state == "failed":
        raise UserError(outcome.message or "the harness could not start", exit_code=outcome.exit_code)
    if outcome.state == "interrupted":
        raise Stopped(outcome.signum or signal.SIGINT)
    return record, read_results(outdir / RESULTS_FILE)
