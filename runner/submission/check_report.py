"""What `deepbench check` found, and the documents it found it in: the shapes every checking module shares
(runner/submission/checker.py runs the checks; the modules beside it add their problems here)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...kernels.results import KernelResult, Plan, RunRecord
from ...kernels.system import SystemDescription
from .layout import SubmissionIndex

Add = Callable[[str, str], None]  # (where, message): a problem or a warning


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
    # The valid results: a list, or a stream (loading.ResultStream) that reads the file as the checks
    # go through it, once, reporting its invalid lines as it meets them.
    results: Iterable[KernelResult] = field(default_factory=list)
    # Whether every line of results.jsonl is a valid result (for a stream: known once it was read).
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
    # flag -> ids of the ok results that carry it, and the number of ok results (check --strict's tally,
    # made on the one pass over the results: the command never reads them again)
    flagged: dict[str, list[str]] = field(default_factory=dict)
    ok_results: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))

    def warn(self, where: str, message: str) -> None:
        self.warnings.append(Problem(where, message))
