"""Which code made a run: its provenance against what this tool is.

The harness's and the runner's source hashes must be those this version computes for its own source.
A bundle of another release cannot be compared (a warning says it is not verifiable: check it with that
version), but a version is only another release where this tool knows it was one (RELEASES): a made-up
`tool_version` ("0.0.9") would otherwise turn any hash into a warning. So a version this tool does not
know, with hashes that are not this version's, is a problem unless the user says --allow-modified. A run
written in an earlier format than this one writes was made by a deepbench before that format
(kernels/format_versions.py): its hashes are not comparable either (a warning). A run from a modified
tree says so itself: a problem unless --allow-modified (then a warning)."""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from ...kernels import __version__
from ...kernels.provenance import harness_sha256, package_sha256
from ...kernels.results import RUN_SCHEMA, RunRecord
from . import layout
from .check_report import Bundle, Report

# Every version of this tool that was released, oldest first (add the new one when the version is bumped:
# tests/test_checker_issue57.py checks that this version is here).
RELEASES: Final = ("0.1.0",)
HEX64 = set("0123456789abcdef")


@lru_cache(maxsize=1)
def own_hashes() -> dict[str, str]:
    """What this tool computes for its own source: the harness (deepbench.kernels) and runner packages."""
    from ..launch.running.provenance import RUNNER_DIR

    return {"harness_sha256": harness_sha256(), "runner_sha256": package_sha256(RUNNER_DIR)}


def check_provenance(b: Bundle, report: Report) -> None:
    run = b.run
    if run is None:
        return
    prov = run.provenance
    if not prov.harness_sha256 or len(prov.harness_sha256) != 64 or not set(prov.harness_sha256) <= HEX64:
        report.add(layout.RUN, "provenance.harness_sha256 is missing or not a SHA-256")
    check_source_hashes(run, b.written_as.get(layout.RUN, RUN_SCHEMA), report)
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


def _foreign(run: RunRecord) -> list[str]:
    """The provenance hashes that are not what this version computes for its own source."""
    return [key for key, ours in own_hashes().items() if getattr(run.provenance, key) != ours]


def check_source_hashes(run: RunRecord, written_as: str, report: Report) -> None:
    """The code that ran must be this version's (the module's docstring says when it cannot be told)."""
    if run.tool_version != __version__ and run.tool_version not in RELEASES:
        _unknown_version(run, report)
        return
    if run.tool_version != __version__ or written_as != RUN_SCHEMA:
        made_by = f"deepbench {run.tool_version}" + (f" writing {written_as}" if written_as != RUN_SCHEMA else "")
        report.warn(
            layout.RUN,
            f"provenance hashes are not verifiable: the run was made by {made_by}, "
            f"this is {__version__} writing {RUN_SCHEMA} (check it with that version)",
        )
        return
    prov = run.provenance
    modified = (prov.source is not None and prov.source.state == "modified") or (
        prov.harness_source is not None and prov.harness_source.state == "modified"
    )
    for key in _foreign(run):
        ours = own_hashes()[key]
        theirs = str(getattr(prov, key))[:16]
        text = f"provenance.{key} {theirs}... is not what deepbench {__version__} computes for its own source"
        if modified and report.allow_modified:
            report.warn(layout.RUN, f"{text}: the run was made from a modified source tree (--allow-modified)")
        elif modified:
            report.add(
                layout.RUN, f"{text}: the run was made from a modified source tree; accepted only with --allow-modified"
            )
        else:
            report.add(layout.RUN, f"{text} ({ours[:16]}...): the code that ran is not this version's")


def _unknown_version(run: RunRecord, report: Report) -> None:
    """A tool_version that no release of this tool had: its hashes must be this version's, unless the
    user accepts modified code."""
    named = f"the run names deepbench {run.tool_version!r}, which is no release of this tool ({', '.join(RELEASES)})"
    foreign = _foreign(run)
    if not foreign:
        report.warn(layout.RUN, f"{named}; its source hashes are this version's ({__version__})")
    elif report.allow_modified:
        report.warn(layout.RUN, f"{named}, and its {' and '.join(foreign)} are not this version's (--allow-modified)")
    else:
        report.add(
            layout.RUN,
            f"{named}, and its {' and '.join(foreign)} are not this version's: the code that ran is unknown; "
            "accepted only with --allow-modified",
        )
