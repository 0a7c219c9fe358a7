"""`deepbench check`: is a submission bundle complete, consistent and untouched? Every problem is
reported with its reason; any problem fails the check.

Bundles are untrusted input. The checker never follows a link, never reads a file over the size
limits (nor a line over the per-record limit: results are read line by line with a bounded
reader), rejects paths that escape the bundle, parses JSON strictly (no NaN, no duplicate keys),
and validates every document against its versioned schema in pydantic's strict mode (a number
or a boolean written as a string is wrong, never converted); what is malformed becomes a problem
with a message, never a traceback.

Then meaning: an `ok` result needs every check passed with its error within its tolerance, its
statistics re-derived from its samples, its flags following from its measurements; every result
lies within one of the run's segments (start to stop, each resume its own); plan.json is the plan
the run started with (its SHA-256 in run.json); and the provenance hashes of the harness and the
runner must be those this version of the tool computes for its own source: with another version
they cannot be compared, and a warning says they are not verifiable.

The declared scope: plan.json names a suite and the selection made within it (--ops, --where,
--limit, --precision; `Plan.selection`). The checker re-derives the kernel list from the frozen
suite definition of this tool plus that selection, and requires plan.json to hold exactly those
kernels, with the catalog's parameters, and results.jsonl to hold one result for each, `ok` (its
check passed, with enough samples) or `unsupported` with a reason. A plan without a selection
(made before selections were recorded) declares the whole suite. The suite hashes recorded in
the run's provenance must match the plan and this tool's frozen suite, so a suite definition
that changed between tool versions is reported rather than silently re-derived."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pydantic import BaseModel, ValidationError

from ...kernels import __version__
from ...kernels.backends import result_backends
from ...kernels.catalog import traits_of
from ...kernels.format_versions import FormatVersionError, upgrade
from ...kernels.model_kernel import MODEL_TOLERANCE
from ...kernels.op_traits import Tolerance
from ...kernels.precision import PRECISIONS, TRANSFORM_TOLERANCE, Precision, recurrence_tolerance, tolerance
from ...kernels.provenance import (
    frozen_suite_sha256,
    harness_sha256,
    items_sha256,
    kernel_identity,
    package_sha256,
    sha256_file,
)
from ...kernels.result_flags import measured_flags
from ...kernels.results import (
    PLAN_SCHEMA,
    RESULT_SCHEMA,
    RUN_SCHEMA,
    KernelResult,
    Plan,
    ResultFields,
    RunRecord,
    Status,
    drop_derived,
)
from ...kernels.suites import SelectionError
from ...kernels.system import SYSTEM_SCHEMA, SystemDescription
from ..errors import UserError
from ..launch.running.planning import declared_items
from . import layout
from .layout import DEFAULT_LIMITS, Limits, SubmissionIndex
from .manifest import check_manifest, scan
from .semantics import check_result, check_settings, unsupported_but_ran

M = TypeVar("M", bound=BaseModel)
DERIVED_RTOL = 1e-6  # TFLOPS re-derived from FLOPs and the median (JSON keeps floats exactly)
# A kernel stopped by the time cap below --min-samples must show this fraction of the cap in its
# samples (the rule stops at twice the cap; loop overhead and calibration are not in the samples).
TIME_CAP_EVIDENCE = 0.9
CLOCK_SLACK = timedelta(seconds=60)  # results' timestamps lie within the run's segments, give or take this
# A check's tolerance may exceed the bound re-derived from the catalog's kernel by this factor: a
# padded GEMM's reduction is a few elements longer than the catalog's k.
TOLERANCE_SLACK = 1.01
HEX64 = set("0123456789abcdef")


@dataclass(frozen=True)
class Problem:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Bundle:
    """The bundle's documents, each None when it could not be loaded (a problem says why)."""

    index: SubmissionIndex | None = None
    system: SystemDescription | None = None
    host_system: SystemDescription | None = None
    plan: Plan | None = None
    run: RunRecord | None = None
    # The valid results: a list, or a ResultStream that reads them again at each pass (check_bundle).
    results: Iterable[KernelResult] = field(default_factory=list)
    results_valid: bool = False
    # Each document's schema_version as the file has it (an older format is read as the current one).
    written_as: dict[str, str] = field(default_factory=dict)


@dataclass
class Report:
    root: Path
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    bundle: Bundle = field(default_factory=Bundle)
    files: int = 0
    allow_modified: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))

    def warn(self, where: str, message: str) -> None:
        self.warnings.append(Problem(where, message))


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
    b.index = _load(root, layout.INDEX, SubmissionIndex, layout.SUBMISSION_SCHEMA, found.files, limits, report)
    b.system = _load(root, layout.SYSTEM, SystemDescription, SYSTEM_SCHEMA, found.files, limits, report)
    b.host_system = _load(root, layout.HOST_SYSTEM, SystemDescription, SYSTEM_SCHEMA, found.files, limits, report)
    b.plan = _load(root, layout.PLAN, Plan, PLAN_SCHEMA, found.files, limits, report)
    b.run = _load(root, layout.RUN, RunRecord, RUN_SCHEMA, found.files, limits, report)
    b.results, b.results_valid = _load_results(root, found.files, limits, report)
    check_documents(b, report)
    return report


def check_documents(b: Bundle, report: Report) -> None:
    """The checks of meaning, on the documents as loaded (what a forger who re-hashes the manifest
    must still get past)."""
    for step in (_check_index, _check_run, _check_scope, _check_results, _check_system, _check_provenance):
        try:
            step(b, report)
        except Exception as exc:  # noqa: BLE001 - input no rule foresaw: a problem, never a traceback
            report.add(
                step.__name__.strip("_").replace("_", " "),
                f"could not be completed on this bundle ({type(exc).__name__}: {exc})"[:500],
            )


# ----- loading ------------------------------------------------------------------------------------
def _strict_json(text: str) -> Any:
    def no_constants(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        dup = next((k for k in keys if keys.count(k) > 1), None)
        if dup is not None:
            raise ValueError(f"duplicate key {dup!r}")
        return dict(pairs)

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"number {text[:40]} overflows a float")
        return value

    return json.loads(text, parse_constant=no_constants, object_pairs_hook=no_duplicates, parse_float=finite)


def _parse(data: bytes, where: str, report: Report) -> Any:
    try:
        return _strict_json(data.decode("utf-8"))
    except UnicodeDecodeError:
        report.add(where, "is not UTF-8 text")
    except json.JSONDecodeError as exc:
        report.add(where, f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
    except ValueError as exc:
        report.add(where, f"is not valid JSON ({exc})")
    except RecursionError:
        report.add(where, "is not valid JSON (nested too deeply)")
    return None


def describe(exc: ValidationError, shown: int = 3) -> str:
    errors = exc.errors()
    text = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(document)'}: {e['msg']}" for e in errors[:shown])
    return text + (f" (and {len(errors) - shown} more)" if len(errors) > shown else "")


def _validate(model: type[M], data: Any, schema: str, where: str, report: Report) -> M | None:
    if not isinstance(data, dict):
        report.add(where, f"is not a JSON object (found {type(data).__name__})")
        return None
    if data.get("schema_version") != schema:  # an older version is read as the current one
        try:
            data = upgrade(data, schema)
        except FormatVersionError as exc:
            report.add(where, str(exc))
            return None
    try:
        # Types first, in strict mode from the JSON text; then the document as the tool reads it.
        strict, typed = (ResultFields, drop_derived(data)) if model is KernelResult else (model, data)
        strict.model_validate_json(json.dumps(typed), strict=True)
        return model.model_validate(data)
    except ValidationError as exc:
        report.add(where, f"does not match its schema: {describe(exc)}")
    except (ValueError, TypeError, RecursionError) as exc:  # a validator that tripped on odd input
        report.add(where, f"does not match its schema: {exc}"[:500])
    return None


def _load(
    root: Path, rel: str, model: type[M], schema: str, files: dict[str, int], limits: Limits, report: Report
) -> M | None:
    if rel not in files:
        return None
    if files[rel] > limits.max_json_bytes:
        report.add(rel, f"is {files[rel]} bytes, over the limit of {limits.max_json_bytes} for a JSON document")
        return None
    try:
        raw = (root / rel).read_bytes()
    except OSError as exc:
        report.add(rel, f"cannot be read: {exc.strerror}")
        return None
    data = _parse(raw, rel, report)
    if isinstance(data, dict) and isinstance(data.get("schema_version"), str):
        report.bundle.written_as[rel] = data["schema_version"]
    return None if data is None else _validate(model, data, schema, rel, report)


def bounded_lines(f: BinaryIO, limit: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) for each line, None for a line longer than `limit` bytes, which is
    skipped without being held in memory (a 1 GiB file of one line costs `limit` bytes, not 1 GiB)."""
    n = 0
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        n += 1
        if len(line) <= limit or line.endswith(b"\n"):  # whole: at most `limit` bytes before its newline
            yield n, line
            continue
        while not line.endswith(b"\n"):  # the rest of the long line, a chunk at a time
            line = f.readline(limit + 1)
            if not line:
                break
        yield n, None


def _stream_results(path: Path, limits: Limits, report: Report) -> Iterator[KernelResult]:
    """The file's valid records one at a time (a problem for each invalid line, up to the limit)."""
    rel = layout.RESULTS
    bad = 0
    with path.open("rb") as f:
        for n, line in bounded_lines(f, limits.max_json_bytes):
            if line is not None and not line.strip():
                continue
            where = f"{rel} line {n}"
            if line is None:
                ok = None
                report.add(where, f"is over {limits.max_json_bytes} bytes")
            else:
                data = _parse(line, where, report)
                if isinstance(data, dict) and isinstance(data.get("id"), str):
                    where = f"{where} ({data['id'][:120]})"
                ok = None if data is None else _validate(KernelResult, data, RESULT_SCHEMA, where, report)
            if ok is None:
                bad += 1
                if bad > limits.max_reported_per_file:
                    report.problems.pop()
            else:
                yield ok
    if bad > limits.max_reported_per_file:
        report.add(rel, f"... and {bad - limits.max_reported_per_file} more invalid lines")


class ResultStream:
    """results.jsonl's valid records, read from the file again at each pass: the checker holds one
    record at a time, whatever the file's size (a 443 MB file once cost 1.77 GB held as a list).
    Its problems are reported by the first pass (_load_results), not again."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path, self.limits = path, limits

    def __iter__(self) -> Iterator[KernelResult]:
        return _stream_results(self.path, self.limits, Report(self.path))


def _load_results(
    root: Path, files: dict[str, int], limits: Limits, report: Report
) -> tuple[Iterable[KernelResult], bool]:
    rel = layout.RESULTS
    if rel not in files:
        return [], False
    before = len(report.problems)
    for _ in _stream_results(root / rel, limits, report):  # the pass that reports every invalid line
        pass
    return ResultStream(root / rel, limits), len(report.problems) == before


# ----- cross-checks -------------------------------------------------------------------------------
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
    spans = _segments(run, report)
    if b.results_valid:
        counts = dict(Counter(r.status.value for r in b.results))
        if counts != run.counts:
            report.add(layout.RUN, f"counts {run.counts} differ from results.jsonl's {counts}")
        for r in b.results:
            if not any(a - CLOCK_SLACK <= r.started_at and r.ended_at <= b + CLOCK_SLACK for a, b in spans):
                report.add(
                    r.id,
                    f"its timestamps ({r.started_at:%H:%M:%S}-{r.ended_at:%H:%M:%S}) lie outside the "
                    f"run's segments ({_spans_text(spans)})",
                )
            if r.ended_at < r.started_at:
                report.add(r.id, "ended before it started")


def _segments(run: RunRecord, report: Report) -> list[tuple[Any, Any]]:
    """The stretches the run ran in: its segments (each start or resume to its stop), or, for a
    record without segments, its start to its end."""
    if not run.segments:
        return [(run.started_at, run.ended_at)]
    spans = []
    for i, seg in enumerate(run.segments):
        if seg.ended_at is None:
            report.add(layout.RUN, f"segment {i + 1} has no end: the run record was not closed")
            continue
        if seg.ended_at < seg.started_at:
            report.add(layout.RUN, f"segment {i + 1} ends before it starts")
        if i and seg.started_at < run.segments[i - 1].started_at:
            report.add(layout.RUN, f"segment {i + 1} starts before segment {i}")
        spans.append((seg.started_at, seg.ended_at))
    if spans and (run.started_at > spans[0][0] + CLOCK_SLACK or run.ended_at < spans[-1][1] - CLOCK_SLACK):
        report.add(layout.RUN, "its start and end do not span its segments")
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
    missing = [i for i in expected if i not in set(have)]
    extra = [i for i in have if i not in set(expected)]
    for i in missing:
        report.add(layout.PLAN, f"kernel {i} of the declared scope (suite {plan.suite} + selection) is not in the plan")
    for i in extra:
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


def _check_results(b: Bundle, report: Report) -> None:
    plan = b.plan
    planned = {i.id: i for i in plan.items} if plan else {}
    seen: set[str] = set()  # ids only: the records themselves stream by (bounded memory)
    for r in b.results:
        if r.id in seen:
            report.add(r.id, "has more than one result")
        seen.add(r.id)
        item = planned.get(r.id)
        if plan is not None and item is None:
            report.add(r.id, "is a result for a kernel the plan does not hold")
        elif plan is not None and item is not None:
            if r.kernel != item.kernel or r.precision != _precision_info(item.precision):
                report.add(r.id, "its kernel or precision differs from the plan's")
            if r.backend not in result_backends(plan.backend):
                report.add(r.id, f"was run by backend {r.backend!r}, the plan says {plan.backend!r}")
        _check_one_result(r, plan, report)
    if not seen and b.results_valid:
        report.add(layout.RESULTS, "holds no results")
    if b.results_valid:  # else the invalid lines are reported already
        for item_id in planned:
            if item_id not in seen:
                report.add(item_id, "has no result in results.jsonl (a kernel of the declared scope is missing)")


def _check_one_result(r: KernelResult, plan: Plan | None, report: Report) -> None:
    """What one result must hold by itself (and against the plan's settings)."""
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
        _check_flags(r, report)
        if "contended" in r.flags:
            report.warn(
                r.id,
                "contended: other processes held CPUs its threads used while it was measured; its "
                "figure reads slow and is not judged (check --strict refuses it; re-run it on a "
                "quiet machine)",
            )
        if r.check is not None and r.check not in [p.check for p in r.parts]:
            report.add(r.id, "its check is none of its parts' checks")
        for p in r.parts:
            _check_samples(r, p, plan, report)
            if not p.check.passed:
                report.add(r.id, f"{p.direction}: its check did not pass")
            elif (
                p.check.error is None
                or not math.isfinite(p.check.error)
                or p.check.tolerance < 0
                or p.check.error > p.check.tolerance
            ):
                report.add(
                    r.id,
                    f"{p.direction}: its check passed with error {p.check.error} against a "
                    f"tolerance of {p.check.tolerance}: a passed check has its error within it",
                )
            elif p.check.tolerance > (bound := tolerance_bound(r, p.direction)) * TOLERANCE_SLACK:
                report.add(
                    r.id,
                    f"{p.direction}: its tolerance {p.check.tolerance:g} is above the {bound:g} "
                    f"this tool allows a {r.precision.name.value} {r.op} check",
                )
            _check_rates(
                r, f"{p.direction}: ", p.tflops, p.gbps, p.flops, p.min_bytes, p.measurement.stats.median, report
            )
        if r.time_us is not None:
            _check_rates(
                r,
                "",
                r.tflops,
                r.gbps,
                sum(p.flops for p in r.parts),
                sum(p.min_bytes for p in r.parts),
                r.time_us.median,
                report,
            )


def _check_rates(
    r: KernelResult,
    where: str,
    tflops: float | None,
    gbps: float | None,
    flops: float,
    min_bytes: float,
    median_us: float,
    report: Report,
) -> None:
    """TFLOP/s and GB/s re-derived from the FLOPs, the fewest bytes and the median time."""
    if median_us <= 0:
        return
    for name, value, derived in (
        ("tflops", tflops, flops / median_us / 1e6),
        ("gbps", gbps, min_bytes / median_us / 1e3),
    ):
        if value is not None and (value or derived) and not math.isclose(value, derived, rel_tol=DERIVED_RTOL):
            report.add(
                r.id,
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


def _check_flags(r: KernelResult, report: Report) -> None:
    """The flags that follow from the measurements alone must be there exactly when they follow."""
    for flag, due in measured_flags(p.measurement for p in r.parts).items():
        if due != (flag in r.flags):
            report.add(
                r.id,
                f"flag {flag!r} is {'missing' if due else 'set'}, but its measurements say "
                f"{'it is' if due else 'it is not'} {flag}",
            )


def _check_samples(r: KernelResult, p: Any, plan: Plan | None, report: Report) -> None:
    """Enough samples: what the run's stop rule requires (--min-samples), checked from the samples
    themselves. The rule stops a kernel too slow for that many samples at twice the time cap:
    then fewer are accepted only if the samples account for at least a time cap, and a warning says
    the figure rests on few samples."""
    m = p.measurement
    n = m.stats.n
    if plan is None or n >= plan.settings.min_samples:
        if n < layout.SUBMISSION_MIN_SAMPLES:
            report.warn(r.id, f"{p.direction} rests on only {n} sample(s)")
        return
    spent_s = sum(m.samples_us) * m.calls_per_sample / 1e6
    if m.stop_reason == "time-cap" and spent_s >= TIME_CAP_EVIDENCE * plan.settings.time_cap_s:
        report.warn(
            r.id,
            f"{p.direction} rests on {n} sample(s) ({spent_s:.2f} s, stopped at the time cap; "
            f"--min-samples is {plan.settings.min_samples}): a longer --time-cap gives a firmer figure",
        )
    else:
        report.add(
            r.id,
            f"{p.direction} rests on {n} sample(s) over {spent_s:.3f} s: the run's stop rule needs "
            f"{plan.settings.min_samples}, or a time cap of {plan.settings.time_cap_s:g} s spent",
        )


def _precision_info(name: str) -> Any:
    try:
        return PRECISIONS.get(Precision(name))
    except ValueError:
        return None


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
    for r in b.results:
        wrong = {k: v for k, v in r.library.items() if libs.get(k) != v}
        if wrong:
            report.add(
                r.id, f"used libraries {wrong} but the system description says { {k: libs.get(k) for k in wrong} }"
            )
    device = run.device.get("name") if isinstance(run.device, dict) else None
    m = sysd.measured
    names = {m.cpu.model, *(a.name for a in m.accelerators), *([m.board.model] if m.board else [])}
    if device and device not in names:
        report.add(
            layout.SYSTEM,
            f"the run's device {device!r} is none of the system's CPU, accelerators or board "
            f"({', '.join(sorted(names))})",
        )
    if not (sysd.vendor.submitter and sysd.vendor.system_name):
        report.warn(
            layout.SYSTEM,
            "the vendor fields submitter and system_name are empty "
            "(deepbench submit --submitter ... --system-name ...)",
        )


def _check_provenance(b: Bundle, report: Report) -> None:
    run = b.run
    if run is None:
        return
    prov = run.provenance
    if not prov.harness_sha256 or len(prov.harness_sha256) != 64 or not set(prov.harness_sha256) <= HEX64:
        report.add(layout.RUN, "provenance.harness_sha256 is missing or not a SHA-256")
    _check_source_hashes(run, b.written_as.get(layout.RUN, RUN_SCHEMA), report)
    if prov.tool_version != run.tool_version:
        report.add(layout.RUN, f"provenance.tool_version {prov.tool_version!r} differs from {run.tool_version!r}")
    if prov.local is None:
        report.add(layout.RUN, "provenance.local is missing: whether it ran in a container is unknown")
    elif not prov.local and not prov.image_digest:
        report.add(layout.RUN, "a container run must record its image digest (provenance.image)")
    if b.plan is not None and prov.seeds.get("inputs") != b.plan.settings.seed:
        report.add(layout.RUN, f"provenance.seeds {prov.seeds} differ from the plan's seed {b.plan.settings.seed}")
    if (
        prov.harness_source is not None
        and prov.harness_source.state == "modified"
        and not report.allow_modified
        and (prov.source is None or prov.source.state != "modified")
    ):
        report.add(layout.RUN, "its harness ran from a modified source tree; accepted only with --allow-modified")
    if prov.source is not None and prov.source.state == "modified":
        text = (
            f"it was run from a modified source tree ({prov.source.changed_count} changed paths at "
            f"{(prov.source.commit or '?')[:12]}): the harness hash identifies the code"
        )
        if report.allow_modified:
            report.warn(layout.RUN, text)
        else:
            report.add(layout.RUN, f"{text}, which is not this tool's; accepted only with --allow-modified")


@lru_cache(maxsize=1)
def own_hashes() -> dict[str, str]:
    """What this tool computes for its own source: the harness (deepbench.kernels) and runner packages."""
    from ..launch.running.provenance import RUNNER_DIR

    return {"harness_sha256": harness_sha256(), "runner_sha256": package_sha256(RUNNER_DIR)}


def _check_source_hashes(run: RunRecord, written_as: str, report: Report) -> None:
    """The code that ran must be this version's: its hashes are compared with ours. Another version's
    cannot be (not verifiable: a warning), nor one that wrote an older format than this one writes
    (a deepbench made before the format's change: kernels/format_versions.py); a run from a modified
    tree says so itself (a warning)."""
    prov = run.provenance
    if run.tool_version != __version__ or written_as != RUN_SCHEMA:
        made_by = f"deepbench {run.tool_version}" + (f" writing {written_as}" if written_as != RUN_SCHEMA else "")
        report.warn(
            layout.RUN,
            f"provenance hashes are not verifiable: the run was made by {made_by}, "
            f"this is {__version__} writing {RUN_SCHEMA} (check it with that version)",
        )
        return
    modified = (prov.source is not None and prov.source.state == "modified") or (
        prov.harness_source is not None and prov.harness_source.state == "modified"
    )
    for key, ours in own_hashes().items():
        theirs = getattr(prov, key)
        if theirs == ours:
            continue
        text = f"provenance.{key} {str(theirs)[:16]}... is not what deepbench {__version__} computes for its own source"
        if modified and report.allow_modified:
            report.warn(layout.RUN, f"{text}: the run was made from a modified source tree (--allow-modified)")
        elif modified:
            report.add(
                layout.RUN, f"{text}: the run was made from a modified source tree; accepted only with --allow-modified"
            )
        else:
            report.add(layout.RUN, f"{text} ({ours[:16]}...): the code that ran is not this version's")
