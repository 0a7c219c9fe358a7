"""`deepbench check`: is a submission bundle complete, consistent and untouched? Every problem is
reported with its reason; any problem fails the check.

Bundles are untrusted input. A folder that is no bundle (neither a manifest nor an index at its top:
`/`, a home folder, a run folder) is refused at once, in one line. The checker never follows a link,
never reads a file over the size limits (nor a line over the per-record limit), rejects paths that
escape the bundle, and reads every document strictly (loading.py): what is malformed or corrupt becomes
a problem with a message, never a traceback.

Then meaning, re-derived rather than trusted: an `ok` result needs every check passed with its error
within its tolerance, its statistics, stop reason, stalled samples and flags following from its samples
and the run's settings, and every figure a report shows following from what it is derived from
(result_checks.py, stop_replay.py, shown_figures.py; semantics.py recomputes costs, directions and the
`unsupported` reasons a backend can give); every result lies within one of the run's segments; plan.json
is the plan the run started with; the device in settings, plan and run agrees with the platform and the
system description, and the run's noise record with its own snapshots (run_claims.py); the provenance
hashes of the harness and the runner are this version's, or a known other release's (provenance_checks.py).
What a bundle cannot prove is what its machine measured: times changed consistently (samples, statistics,
rates and derived figures alike) only `deepbench verify`, a re-run, can catch.

The declared scope: plan.json names a suite and the selection made within it (--ops, --where,
--limit, --precision; `Plan.selection`). The checker re-derives the kernel list from the frozen
suite definition of this tool plus that selection, and requires plan.json to hold exactly those
kernels, with the catalog's parameters, and results.jsonl to hold one result for each, `ok` (its
check passed, with enough samples) or `unsupported` with a reason. A plan without a selection
(made before selections were recorded) declares the whole suite. The suite hashes recorded in
the run's provenance must match the plan and this tool's frozen suite, so a suite definition
that changed between tool versions is reported rather than silently re-derived.

results.jsonl is read once, whatever its size: every rule about one result, and the tallies the whole
file is held to (counts, ids, missing kernels, flags), are made in that one pass (ResultsPass)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from ...kernels.backends import result_backends
from ...kernels.precision import PRECISIONS, Precision
from ...kernels.provenance import frozen_suite_sha256, items_sha256, kernel_identity, sha256_file
from ...kernels.results import PLAN_SCHEMA, RUN_SCHEMA, KernelResult, Plan, RunRecord, Status
from ...kernels.suites import SelectionError
from ...kernels.system import SYSTEM_SCHEMA, SystemDescription
from ..analysis.flagged import DOUBT_FLAGS
from ..errors import UserError
from ..launch.running.planning import declared_items
from . import layout
from .check_report import Bundle, Problem, Report
from .layout import DEFAULT_LIMITS, MANIFEST, Limits, SubmissionIndex
from .loading import ResultStream, bounded_lines, describe, load
from .loading import validate as _validate
from .manifest import check_manifest, scan
from .provenance_checks import check_provenance, own_hashes
from .result_checks import check_ok_result, tolerance_bound
from .run_claims import check_device, check_noise
from .semantics import check_result, check_settings, unsupported_but_ran
from .shown_figures import check_shown

# What other modules and tests import from here.
__all__ = [
    "Bundle",
    "Problem",
    "Report",
    "_validate",
    "bounded_lines",
    "check_bundle",
    "check_documents",
    "declared_items",
    "describe",
    "own_hashes",
    "tolerance_bound",
]
CLOCK_SLACK = timedelta(seconds=60)  # results' timestamps lie within the run's segments, give or take this
BUNDLE_MARKERS = (MANIFEST, layout.INDEX)  # a folder holding neither at its top is no bundle
RUN_FOLDER_MARKERS = ("run.json", "results.jsonl", "plan.json")  # what a deepbench-run folder holds
DOCUMENTS = (
    ("index", layout.INDEX, SubmissionIndex, layout.SUBMISSION_SCHEMA),
    ("system", layout.SYSTEM, SystemDescription, SYSTEM_SCHEMA),
    ("host_system", layout.HOST_SYSTEM, SystemDescription, SYSTEM_SCHEMA),
    ("plan", layout.PLAN, Plan, PLAN_SCHEMA),
    ("run", layout.RUN, RunRecord, RUN_SCHEMA),
)


def check_bundle(root: Path, limits: Limits = DEFAULT_LIMITS, allow_modified: bool = False) -> Report:
    """Every check, in order; later checks run on whatever earlier ones could load. A run from a
    modified source tree is a problem unless `allow_modified` (then a warning)."""
    if not root.exists() and not root.is_symlink():
        raise UserError(f"no bundle at {root} (make one with: deepbench submit RUN --out DIR)")
    report = Report(root, allow_modified=allow_modified)
    if root.is_symlink():
        report.add(str(root), "the bundle is a symbolic link: give the folder itself")
        return report
    if not root.is_dir():
        raise UserError(f"{root} is not a folder (a bundle is the folder deepbench submit wrote)")
    refuse_unless_bundle(root)
    found = scan(root, limits)
    report.files = len(found.files)
    for where, message in found.problems:
        report.add(where, message)
    for where, message in check_manifest(root, found, limits):
        report.add(where, message)
    for role, rel in [*layout.LAYOUT.items(), ("index", layout.INDEX)]:
        if rel not in found.files and not any(p.where == rel for p in report.problems):
            report.add(rel, f"is missing: the bundle's {role.replace('_', ' ')} is required")
    b = report.bundle
    for attr, rel, model, schema in DOCUMENTS:
        setattr(b, attr, load(root, rel, model, schema, found.files, limits, report))
    if layout.RESULTS in found.files:
        b.results = ResultStream(root / layout.RESULTS, limits, report)
    check_documents(b, report)
    return report


def refuse_unless_bundle(root: Path) -> None:
    """One line, at once, for a folder that is no bundle (before anything under it is read)."""
    if any(os.path.lexists(root / name) for name in BUNDLE_MARKERS):
        return
    run_folder = any(os.path.lexists(root / name) for name in RUN_FOLDER_MARKERS)
    hint = (
        f": it is a run folder; make a bundle of it with: deepbench submit {root} --out DIR"
        if run_folder
        else " (a bundle is the folder deepbench submit wrote)"
    )
    raise UserError(f"{root} is not a submission bundle: it holds neither {MANIFEST} nor {layout.INDEX}{hint}")


def check_documents(b: Bundle, report: Report) -> None:
    """The checks of meaning, on the documents as loaded (what a forger who re-hashes the manifest
    must still get past): the documents' own, then one pass over the results."""
    for step in (_check_index, _check_run, _check_scope, _check_system, check_device, check_noise, check_provenance):
        _guarded(step.__name__, partial(step, b, report), report)
    _guarded("check results", partial(_results_pass, b, report), report)


def _guarded(name: str, step: Callable[[], Any], report: Report, where: str = "") -> None:
    """Run a step; input no rule foresaw is a problem, never a traceback."""
    try:
        step()
    except Exception as exc:  # noqa: BLE001
        report.add(
            where or name.strip("_").replace("_", " "),
            f"could not be completed on this bundle ({type(exc).__name__}: {exc})"[:500],
        )


# ----- the documents ------------------------------------------------------------------------------
def _check_index(b: Bundle, report: Report) -> None:
    idx = b.index
    if idx is None:
        return
    if idx.files != layout.LAYOUT:
        report.add(layout.INDEX, f"files {idx.files} differ from the fixed layout {layout.LAYOUT}")
    for doc, name in ((b.plan, layout.PLAN), (b.run, layout.RUN)):
        if doc is None:
            continue
        for attr in ("run_id", "suite", "platform", "backend"):
            if getattr(doc, attr) != getattr(idx, attr):
                report.add(layout.INDEX, f"{attr} {getattr(idx, attr)!r} differs from {name}'s {getattr(doc, attr)!r}")
    if b.run is not None:
        if b.run.provenance.image_digest != idx.image_digest:
            report.add(
                layout.INDEX,
                f"image_digest {idx.image_digest!r} differs from the run's {b.run.provenance.image_digest!r}",
            )
        if b.run.provenance.local is not None and b.run.provenance.local != idx.local:
            report.add(layout.INDEX, f"local={idx.local} differs from the run's provenance")
        ran = b.run.provenance.image.get("id") if isinstance(b.run.provenance.image, dict) else None
        if idx.image is not None and idx.image.id != ran:
            report.add(layout.INDEX, f"image.id {idx.image.id!r} differs from the image the run recorded ({ran!r})")


def _check_run(b: Bundle, report: Report) -> None:
    plan, run = b.plan, b.run
    if run is None:
        return
    if run.state != "complete":
        report.add(layout.RUN, f"the run is {run.state}, not complete")
    if plan is not None:
        check_settings(plan, report.add, layout.PLAN, cpus=b.system.measured.cpu.usable_cpus if b.system else None)
        if run.settings != plan.settings:
            report.add(layout.RUN, "its settings differ from plan.json's")
        if run.planned != len(plan.items):
            report.add(layout.RUN, f"planned={run.planned} but plan.json holds {len(plan.items)} kernels")
        for attr in ("run_id", "suite", "platform", "backend"):
            if getattr(run, attr) != getattr(plan, attr):
                report.add(
                    layout.RUN, f"{attr} {getattr(run, attr)!r} differs from plan.json's {getattr(plan, attr)!r}"
                )
    if (
        run.plan_sha256 is not None
        and (report.root / layout.PLAN).is_file()
        and sha256_file(report.root / layout.PLAN) != run.plan_sha256
    ):
        report.add(
            layout.PLAN, "is not the plan the run started with (its SHA-256 differs from run.json's plan_sha256)"
        )


def segments(run: RunRecord, add: Callable[[str, str], None]) -> list[tuple[Any, Any]]:
    """The stretches the run ran in: its segments (each start or resume to its stop), or, for a
    record without segments, its start to its end."""
    if not run.segments:
        return [(run.started_at, run.ended_at)]
    spans = []
    for i, seg in enumerate(run.segments):
        if seg.ended_at is None:
            add(layout.RUN, f"segment {i + 1} has no end: the run record was not closed")
            continue
        if seg.ended_at < seg.started_at:
            add(layout.RUN, f"segment {i + 1} ends before it starts")
        if i and seg.started_at < run.segments[i - 1].started_at:
            add(layout.RUN, f"segment {i + 1} starts before segment {i}")
        spans.append((seg.started_at, seg.ended_at))
    if spans and (run.started_at > spans[0][0] + CLOCK_SLACK or run.ended_at < spans[-1][1] - CLOCK_SLACK):
        add(layout.RUN, "its start and end do not span its segments")
    return spans


def _spans_text(spans: list[tuple[Any, Any]]) -> str:
    return ", ".join(f"{a:%H:%M:%S}-{b:%H:%M:%S}" for a, b in spans[:5]) + (" ..." if len(spans) > 5 else "")


def _check_scope(b: Bundle, report: Report) -> None:
    plan = b.plan
    if plan is None:
        return
    if plan.selection is None:
        report.warn(layout.PLAN, "declares no selection: its scope is taken to be the whole suite")
    try:
        declared = {i.id: i for i in declared_items(plan)}
        expected = list(declared)
    except (SelectionError, UserError) as exc:
        report.add(layout.PLAN, f"its suite or selection is not valid here: {exc}")
        return
    have = [i.id for i in plan.items]
    for i in [i for i in expected if i not in set(have)]:
        report.add(layout.PLAN, f"kernel {i} of the declared scope (suite {plan.suite} + selection) is not in the plan")
    for i in [i for i in have if i not in set(expected)]:
        report.add(layout.PLAN, f"kernel {i} is not in the declared scope (suite {plan.suite} + selection)")
    for i, n in Counter(have).items():
        if n > 1:
            report.add(layout.PLAN, f"kernel {i} is planned {n} times")
    for item in plan.items:
        frozen = declared.get(item.id)
        if frozen is not None and kernel_identity(frozen.kernel) != kernel_identity(item.kernel):
            report.add(layout.PLAN, f"kernel {item.id}'s parameters differ from the suite's definition")
    prov = b.run.provenance if b.run else None
    if prov is not None:
        if prov.suite_sha256 != items_sha256(plan.items):
            report.add(layout.PLAN, "its kernels differ from those the run recorded (provenance.suite_sha256)")
        frozen_sha = frozen_suite_sha256(plan.suite, plan.selection)
        if frozen_sha is not None and prov.frozen_suite_sha256 != frozen_sha:
            report.add(
                layout.RUN,
                f"suite {plan.suite} was defined differently when this was run "
                f"(deepbench {prov.tool_version}) than in this checker's "
                f"(frozen_suite_sha256 differs): completeness cannot be judged",
            )


def _check_system(b: Bundle, report: Report) -> None:
    sysd, run = b.system, b.run
    if sysd is None or run is None:
        return
    if run.system is None:
        report.add(layout.RUN, "holds no system description (made by an older deepbench)")
    elif run.system.measured != sysd.measured:
        fields = [
            f for f in type(sysd.measured).model_fields if getattr(sysd.measured, f) != getattr(run.system.measured, f)
        ]
        report.add(
            layout.SYSTEM,
            f"its measured description differs from the one the harness recorded in run.json "
            f"({', '.join(fields)}): only the vendor fields may be edited",
        )
    if b.host_system is not None and run.host_system is not None and b.host_system.measured != run.host_system.measured:
        report.add(layout.HOST_SYSTEM, "differs from the host description recorded in run.json")
    libs = sysd.measured.libraries
    if run.software != libs:
        report.add(layout.SYSTEM, f"its libraries {libs} differ from the run's software {run.software}")
    if not (sysd.vendor.submitter and sysd.vendor.system_name):
        report.warn(
            layout.SYSTEM,
            "the vendor fields submitter and system_name are empty "
            "(deepbench submit --submitter ... --system-name ...)",
        )


def _precision_info(name: str) -> Any:
    try:
        return PRECISIONS.get(Precision(name))
    except ValueError:
        return None


# ----- the results, in one pass -------------------------------------------------------------------
def _results_pass(b: Bundle, report: Report) -> None:
    ResultsPass(b, report).run()


class ResultsPass:
    """Every rule about the results, made as they stream by: each record's own, and the tallies the
    whole file is held to (ids seen once, counts, kernels missing, the flags --strict refuses). Only ids
    are kept, never records, so memory does not grow with the file."""

    def __init__(self, b: Bundle, report: Report) -> None:
        self.b, self.report = b, report
        self.plan = b.plan
        self.planned = {i.id: i for i in b.plan.items} if b.plan else {}
        self.spans = segments(b.run, report.add) if b.run else []
        self.libs = b.system.measured.libraries if b.system else None
        self.seen: set[str] = set()
        self.counts: Counter[str] = Counter()

    def run(self) -> None:
        for r in self.b.results:
            _guarded("check results", partial(self.visit, r), self.report, where=r.id)
        if isinstance(self.b.results, ResultStream):
            self.b.results_valid = bool(self.b.results.valid)
        self.finish()

    def visit(self, r: KernelResult) -> None:
        report, plan = self.report, self.plan
        if r.id in self.seen:
            report.add(r.id, "has more than one result")
        self.seen.add(r.id)
        self.counts[r.status.value] += 1
        self._against_plan(r)
        self._in_segments(r)
        if self.libs is not None:
            wrong = {k: v for k, v in r.library.items() if self.libs.get(k) != v}
            if wrong:
                said = {k: self.libs.get(k) for k in wrong}
                report.add(r.id, f"used libraries {wrong} but the system description says {said}")
        check_result(r, plan, report.add)
        ran = unsupported_but_ran(r, plan) if plan is not None else None
        if plan is not None and ran is not None:
            report.warn(
                r.id,
                f"is unsupported, but this tool's published run {ran} measured it on platform "
                f"{plan.platform} with backend {plan.backend}",
            )
        if r.status in (Status.FAILED, Status.TIMEOUT):
            report.add(r.id, f"{r.status.value}: {r.reason[:300]}")
        elif r.status is Status.OK:
            check_ok_result(r, plan, report.add, report.warn)
            check_shown(r, plan, report.add, report.warn)
            self._tally_flags(r)

    def _against_plan(self, r: KernelResult) -> None:
        plan = self.plan
        if plan is None:
            return
        item = self.planned.get(r.id)
        if item is None:
            self.report.add(r.id, "is a result for a kernel the plan does not hold")
            return
        if r.kernel != item.kernel or r.precision != _precision_info(item.precision):
            self.report.add(r.id, "its kernel or precision differs from the plan's")
        if r.backend not in result_backends(plan.backend):
            self.report.add(r.id, f"was run by backend {r.backend!r}, the plan says {plan.backend!r}")

    def _in_segments(self, r: KernelResult) -> None:
        if self.b.run is None:
            return
        if not any(a - CLOCK_SLACK <= r.started_at and r.ended_at <= b + CLOCK_SLACK for a, b in self.spans):
            self.report.add(
                r.id,
                f"its timestamps ({r.started_at:%H:%M:%S}-{r.ended_at:%H:%M:%S}) lie outside the "
                f"run's segments ({_spans_text(self.spans)})",
            )
        if r.ended_at < r.started_at:
            self.report.add(r.id, "ended before it started")

    def _tally_flags(self, r: KernelResult) -> None:
        self.report.ok_results += 1
        for flag in r.flags:
            if flag in DOUBT_FLAGS:
                self.report.flagged.setdefault(flag, []).append(r.id)

    def finish(self) -> None:
        report, b = self.report, self.b
        if not b.results_valid:
            return  # the invalid lines are reported already; counts and completeness cannot be judged
        if not self.seen:
            report.add(layout.RESULTS, "holds no results")
        if b.run is not None and dict(self.counts) != b.run.counts:
            report.add(layout.RUN, f"counts {b.run.counts} differ from results.jsonl's {dict(self.counts)}")
        for item_id in self.planned:
            if item_id not in self.seen:
                report.add(item_id, "has no result in results.jsonl (a kernel of the declared scope is missing)")
