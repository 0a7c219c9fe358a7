"""What `deepbench check --strict` knows of this tool's published runs, shipped as package data.

--strict refuses an `unsupported` result of a kernel that a published run of this tool measured
`ok` on the same platform with the same backend (semantics.unsupported_but_ran). The published runs
(runner/published: 8 MB of results with their samples) are data of a source checkout, not package
data, and the images leave them out; a checker that read them would judge one way in a checkout and
another once installed. So the rule reads an index instead: platform -> backend -> kernel id/precision
-> the published run it was `ok` in (the first such run in path order), written from runner/published
into runner/data/published_ok.json.gz by this module. tests/test_published_ok.py fails when the
index differs from what runner/published holds; after adding or changing a published run:

    python3 -m deepbench.runner.submission.published_ok --write
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from ...kernels.format_versions import read_model
from ...kernels.results import PLAN_FILE, Plan, Status
from ..errors import UserError

INDEX_SCHEMA: Final = "deepbench.published-ok/1"
PACKAGE: Final = "deepbench.runner"
DATA_DIR = ("data",)
INDEX_NAME: Final = "published_ok.json.gz"
RUNNER_DIR = Path(__file__).resolve().parents[1]
PUBLISHED = RUNNER_DIR / "published"  # a source checkout's published runs (absent from an installed package)
INDEX_PATH = RUNNER_DIR.joinpath(*DATA_DIR, INDEX_NAME)  # where --write puts the index (package data)
WRITE_COMMAND: Final = "python3 -m deepbench.runner.submission.published_ok --write"

# platform -> backend -> "op/set/index/precision" -> the published run (its folder under runner/published)
OkRuns = dict[str, dict[str, dict[str, str]]]


class PublishedOk(BaseModel):
    """The index as stored: its format version and the runs, nothing else (a stray key is an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: str = Field(description=f"the format of the index ({INDEX_SCHEMA})")
    ok: OkRuns = Field(description="platform -> backend -> kernel id/precision -> the run it was ok in")


def build(published: Path = PUBLISHED) -> OkRuns:
    """The index of the published runs under `published`: every run folder holding a plan.json,
    in path order; a folder that cannot be read is a one-line UserError (an index that silently
    left a run out would let --strict pass what that run contradicts)."""
    from ..analysis.sources import read_run_folder  # the reports' reader: only the generator needs it

    if not published.is_dir():
        raise UserError(
            f"no published runs at {published}: the index is made from a source checkout of deepbench "
            f"({WRITE_COMMAND} there)"
        )
    out: OkRuns = {}
    for plan_file in sorted(published.rglob(PLAN_FILE)):
        run = plan_file.parent.relative_to(published).as_posix()
        try:
            plan = read_model(Plan, plan_file.read_bytes(), str(plan_file))
        except (OSError, ValueError) as exc:
            raise UserError(f"published run {run}: its {PLAN_FILE} cannot be read ({exc})"[:500]) from None
        results, _record = read_run_folder(plan_file.parent)
        runs = out.setdefault(plan.platform, {}).setdefault(plan.backend, {})
        for r in results:
            if r.status is Status.OK:
                runs.setdefault(f"{r.kernel.id}/{r.precision.name.value}", run)
    return out


def encode(ok: OkRuns) -> bytes:
    """The index's bytes: canonical JSON (sorted keys), gzipped with no time or name in the header,
    so the same published runs give the same file."""
    doc = PublishedOk(schema_version=INDEX_SCHEMA, ok=ok).model_dump(mode="json")
    text = json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"
    return gzip.compress(text.encode(), mtime=0)


def decode(data: bytes, where: str = INDEX_NAME) -> OkRuns:
    """The runs of an index's bytes; a damaged file or another format is a ValueError naming the fix."""
    try:
        doc = PublishedOk.model_validate_json(gzip.decompress(data), strict=True)
    except (OSError, EOFError, ValueError) as exc:
        raise ValueError(f"{where} is not a published-runs index ({exc}); remake it: {WRITE_COMMAND}") from None
    if doc.schema_version != INDEX_SCHEMA:
        raise ValueError(f"{where} is {doc.schema_version}, this tool reads {INDEX_SCHEMA}; remake it: {WRITE_COMMAND}")
    return doc.ok


@cache
def shipped() -> OkRuns:
    """The index this installation ships (its package data: the same in a checkout and installed)."""
    resource = resources.files(PACKAGE)
    for part in DATA_DIR:
        resource = resource / part
    resource = resource / INDEX_NAME
    return decode(resource.read_bytes(), f"{PACKAGE}/{'/'.join(DATA_DIR)}/{INDEX_NAME}")


def _count(ok: OkRuns) -> int:
    return sum(len(ids) for backends in ok.values() for ids in backends.values())


def main(argv: Sequence[str] | None = None) -> int:
    """--write: write the index from runner/published; without it, say whether the shipped one is
    up to date (exit 1 when it is not)."""
    parser = argparse.ArgumentParser(
        prog="python3 -m deepbench.runner.submission.published_ok",
        description="the index of this tool's published runs that `deepbench check --strict` reads",
    )
    parser.add_argument("--write", action="store_true", help=f"write {INDEX_PATH} from {PUBLISHED}")
    args = parser.parse_args(argv)
    try:
        ok = build()
        if args.write:
            INDEX_PATH.write_bytes(encode(ok))
            print(f"wrote {INDEX_PATH}: {_count(ok)} kernels ok in published runs")
            return 0
        current = decode(INDEX_PATH.read_bytes(), str(INDEX_PATH)) if INDEX_PATH.is_file() else None
    except (UserError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if current != ok:
        state = "is missing" if current is None else f"differs from what {PUBLISHED} holds"
        print(f"{INDEX_PATH} {state}: {WRITE_COMMAND}")
        return 1
    print(f"{INDEX_PATH} is up to date ({_count(ok)} kernels ok in published runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
