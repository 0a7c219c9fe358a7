"""The bundle's fixed layout, its index (submission.json) and the limits the checker enforces.

BUNDLE/
  MANIFEST.sha256     sha256sum-compatible: "<sha256>  <path>" for every other file
  submission.json     this index: schema, run id, the command that reproduces it
  README.md           what was run, on what, and how to reproduce and verify it
  system.json         the system description (measured by the harness + vendor-filled fields)
  host_system.json    the host that launched the harness (the runner's view)
  plan.json           the plan: suite, declared selection, settings, every kernel
  run.json            the run record: counts, device, provenance
  results.jsonl       one result per kernel (raw samples, statistics, checks)
  logs/harness.log    the harness's stderr
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SUBMISSION_SCHEMA: Final = "deepbench.submission/1"
MANIFEST = "MANIFEST.sha256"
INDEX = "submission.json"
README = "README.md"
SYSTEM = "system.json"
HOST_SYSTEM = "host_system.json"
PLAN = "plan.json"
RUN = "run.json"
RESULTS = "results.jsonl"
HARNESS_LOG = "logs/harness.log"

# role -> path; every role is required (an empty log is still a file).
LAYOUT: dict[str, str] = {
    "readme": README,
    "system": SYSTEM,
    "host_system": HOST_SYSTEM,
    "plan": PLAN,
    "run": RUN,
    "results": RESULTS,
    "harness_log": HARNESS_LOG,
}

ROLE_TEXT: dict[str, str] = {
    "readme": "this page",
    "system": "the system description: measured by the harness, plus the vendor's fields",
    "host_system": "the host that launched the harness, as the runner saw it",
    "plan": "the plan: suite, declared selection, settings and every kernel",
    "run": "the run record: counts, device, software, provenance (hashes, command, image, seeds, timestamps)",
    "results": "one result per kernel: raw samples, statistics, checks",
    "harness_log": "the harness's stderr",
}

# Fewer samples than this per direction draw a warning (the check requires what the run's own stop
# rule requires: --min-samples, or a spent time cap; see checker._check_samples).
SUBMISSION_MIN_SAMPLES = 3


@dataclass(frozen=True)
class Limits:
    """What an untrusted bundle may hold before the checker refuses to read it. A full DeepBench
    suite with --rigorous keeps up to 10,000 raw samples per direction: results stay well under
    the per-file limit."""

    max_file_bytes: int = 1 << 30
    max_total_bytes: int = 4 << 30
    max_files: int = 10_000
    max_json_bytes: int = 64 << 20  # one JSON document or one JSON Lines record
    max_reported_per_file: int = 100  # then "... and N more" (a garbage file must not flood the screen)


DEFAULT_LIMITS = Limits()


class ImageArchive(BaseModel):
    """The image written to a file (deepbench images export), kept beside the bundle: too large
    for the bundle itself (a vendor image is many GB)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="the file's name, beside the bundle (for a reader; verify never loads it)")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class ImageSource(BaseModel):
    """Where the run's image can be had again: its id (kept by docker save/load and by a push and
    pull by digest), and an archive, a registry reference by digest, or both."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="the image id the run recorded")
    archive: ImageArchive | None = None
    registry: str | None = Field(None, pattern=r"^[^@\s]+@sha256:[0-9a-f]{64}$", description="REPO@sha256:DIGEST")


class SubmissionIndex(BaseModel):
    """submission.json: what the bundle is, and how to reproduce it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal["deepbench.submission/1"] = SUBMISSION_SCHEMA
    created_at: datetime
    tool_version: str
    run_id: str
    suite: str
    platform: str
    backend: str
    local: bool
    image_digest: str | None = None
    image: ImageSource | None = Field(None, description="where to get the run's image (container runs)")
    reproduce: str = Field(description="the deepbench-run command that makes the same plan")
    verify: str = Field(description="the deepbench verify command that re-runs and compares")
    files: dict[str, str] = Field(description="role -> path in the bundle (the fixed layout)")
