"""Provenance: what exactly produced a run, recorded in every run record.

A number is reproducible only if one can tell which code measured it, on which kernels, with
which settings, and from which source. The harness fills what only it knows (the hash of the
package that actually ran: inside the container that is the image's copy, not the host's);
the runner adds the host's part (command line, image digest, source-tree state). Hashes are
SHA-256 over canonical forms, so two machines with the same code and suite get the same hash:

- `harness_sha256`: every file of the installed `deepbench.kernels` package (code and the suite
  data), by relative path: `path NUL sha256(content) LF` lines, sorted, hashed again. Only what an
  installed package holds is hashed (its packages' modules and its data/), so a checkout and an
  install of the same code agree; `runner_sha256` is the same over `deepbench.runner`.
- `suite_sha256`: the plan's items (kernel id, DeepBench's parameters, precision), as canonical JSON.
- `frozen_suite_sha256`: the whole named suite before any --ops/--where/--limit selection. The
  runner hashes the suite it selected from (runner/selection.py) and records it in the plan; the
  harness and the checker take it from there or hash a suite once per process.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from .suites import SelectionError, suite_kernels

PROVENANCE_SCHEMA: Final = "deepbench.provenance/1"
GIT_TIMEOUT_S = 10.0
MAX_CHANGED_PATHS = 50  # a modified tree lists at most this many paths (the count is kept)
HASHED_SUFFIXES = (".py", ".json", ".md", ".txt", ".toml")  # package data included, bytecode not
DATA_FOLDER = "data"  # a package's data files (pyproject.toml's package-data) lie under its data/
PROJECT_NAME_LINE = 'name = "deepbench"'
# What a run executes: the package, the image recipes and the packaging. A change elsewhere (tests, docs,
# evidence) changes nothing that ran, so it does not make a run "modified".
TOOL_PATHS = ("runner", "kernels", "images", "pyproject.toml", "setup.py")
SUITE_HASHES_CACHED = 16  # (suite, batch, seq) hashes kept per process


class SourceState(BaseModel):
    """Whether the code that ran is a clean commit: 'clean', 'modified', or 'unknown' (not a git
    checkout, git absent: an installed wheel or a container image), with why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: Literal["clean", "modified", "unknown"]
    commit: str | None = None
    changed: tuple[str, ...] = Field((), description=f"changed or untracked paths (first {MAX_CHANGED_PATHS})")
    changed_count: int = 0
    reason: str = ""


class Provenance(BaseModel):
    """Typed provenance of a run. Every field is optional so that records written before it
    existed still load; extra keys are allowed so that a runner may add facts (it replaced a
    free-form dict, and reads as one too: `provenance["image"]`, `provenance.get("image")`)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    schema_version: Literal["deepbench.provenance/1"] = PROVENANCE_SCHEMA
    tool_version: str | None = None
    harness_sha256: str | None = Field(None, description="the deepbench.kernels package that ran the kernels")
    runner_sha256: str | None = Field(None, description="the deepbench.runner package that launched it")
    suite_sha256: str | None = Field(None, description="the plan's kernels and precisions")
    frozen_suite_sha256: str | None = Field(None, description="the named suite before selection")
    image: Any = Field(None, description="the container image (its digest identifies it); null with --local")
    local: bool | None = Field(None, description="run with --local (no container)")
    command: str | None = Field(None, description="the command line that produced (or last resumed) the run")
    seeds: dict[str, int] = Field(default_factory=dict, description="seeds of the random inputs")
    timestamps: dict[str, datetime] = Field(default_factory=dict, description="plan written, harness started ...")
    source: SourceState | None = Field(None, description="the source tree of the runner (git), if a checkout")
    harness_source: SourceState | None = Field(None, description="the source tree of the harness, if a checkout")
    python: dict[str, str] = Field(default_factory=dict, description="Python versions: harness, runner")

    def __getitem__(self, key: str) -> Any:
        return self.get(key)

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key, None) if key in type(self).model_fields else (self.model_extra or {}).get(key)
        return default if value is None else value

    @property
    def image_digest(self) -> str | None:
        """The image's content digest, whether `image` was recorded as a string or a mapping."""
        img = self.image
        if isinstance(img, dict):
            for key in ("digest", "id", "repo_digest"):
                if isinstance(img.get(key), str) and "sha256:" in img[key]:
                    return img[key]
            return None
        return img if isinstance(img, str) and "sha256:" in img else None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


def _package_files(root: Path) -> Iterator[Path]:
    """The files an installed copy of the package at `root` holds (and hashes): its packages' modules
    and its data/. A checkout holds more under the same folder (runner/published: runs for the
    reports, not package data); hashed, they would give a checkout and an install of the same code
    different hashes, and an installed `deepbench check` would refuse a checkout's run."""

    @cache
    def in_package(folder: Path) -> bool:  # every folder from the root down holds an __init__.py (setup.py)
        return (folder / "__init__.py").is_file() and (folder == root or in_package(folder.parent))

    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix not in HASHED_SUFFIXES:
            continue
        if path.relative_to(root).parts[0] == DATA_FOLDER or (path.suffix == ".py" and in_package(path.parent)):
            yield path


def package_sha256(root: Path) -> str:
    """Hash of a package's source and data files (see the module's docstring for the form)."""
    lines = [f"{p.relative_to(root).as_posix()}\0{sha256_file(p)}\n" for p in _package_files(root)]
    return sha256_bytes("".join(lines).encode())


def harness_sha256() -> str:
    return package_sha256(Path(__file__).resolve().parent)


def kernel_identity(kernel: Any) -> dict[str, Any]:
    """What defines a kernel for hashing: its id and DeepBench's parameters (not every field of
    the model, so that an optional field added to the model later does not change the hash)."""
    return {"id": kernel.id, **kernel.params()}


def items_sha256(items: Iterable[Any]) -> str:
    """Hash of plan items (PlanItem: kernel + precision), in plan order."""
    return sha256_bytes(canonical_json([{**kernel_identity(i.kernel), "precision": i.precision} for i in items]))


def kernels_sha256(kernels: Iterable[Any]) -> str:
    """Hash of a suite's kernels, in the suite's order."""
    return sha256_bytes(canonical_json([kernel_identity(k) for k in kernels]))


def source_state(path: Path) -> SourceState:
    """Git state of the deepbench checkout holding `path`; 'unknown' when it is not one.

    Only a checkout whose top level is this project counts: a wheel installed in a virtual
    environment that happens to sit inside some other repository must not report that one. Only
    changes to the tool's own paths (TOOL_PATHS) make it 'modified'."""

    def git(*args: str) -> str:
        # rstrip only the newline: porcelain lines start with a space
        return subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=True
        ).stdout.rstrip("\n")

    try:
        top = Path(git("rev-parse", "--show-toplevel"))
    except FileNotFoundError:
        return SourceState(state="unknown", reason="git is not installed")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        return SourceState(state="unknown", reason="not run from a git checkout (an installed package or image)")
    try:
        pyproject = (top / "pyproject.toml").read_text()
    except OSError:
        pyproject = ""
    if PROJECT_NAME_LINE not in pyproject:
        return SourceState(state="unknown", reason=f"the enclosing git repository ({top.name}) is not deepbench's")
    try:
        commit = git("rev-parse", "HEAD")
        changed = [
            line[3:]
            for line in git(
                "status", "--porcelain", "--untracked-files=normal", "--", *(f":(top){t}" for t in TOOL_PATHS)
            ).splitlines()
            if line.strip()
        ]
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        return SourceState(state="unknown", reason=f"git failed: {exc}"[:300])
    return SourceState(
        state="modified" if changed else "clean",
        commit=commit,
        changed=tuple(changed[:MAX_CHANGED_PATHS]),
        changed_count=len(changed),
    )


def frozen_suite_sha256(suite: str, selection: Any = None) -> str | None:
    """The hash of the named suite before selection (None for a suite that cannot be built here).
    Model suites depend on the batch and sequence length the selection declares."""
    return _suite_sha256(suite, getattr(selection, "batch", None), getattr(selection, "seq", None))


@lru_cache(maxsize=SUITE_HASHES_CACHED)
def _suite_sha256(suite: str, batch: int | None, seq: int | None) -> str | None:
    """Each suite is built and hashed once per process, however many ask (a check of a bundle
    asks for its plan's, then for each kernel's scope)."""
    try:
        return kernels_sha256(suite_kernels(suite, batch, seq))
    except SelectionError:
        return None


def harness_provenance(plan: Any, started_at: datetime) -> dict[str, Any]:
    """The harness's part, computed where the kernels run (in the container, with --local on
    the host): the package that ran, the plan's kernels, the seeds."""
    import platform

    from . import __version__

    frozen = getattr(plan, "frozen_suite_sha256", None) or frozen_suite_sha256(
        plan.suite, getattr(plan, "selection", None)
    )
    here = Path(__file__).resolve().parent
    part = Provenance(
        tool_version=__version__,
        harness_sha256=package_sha256(here),
        suite_sha256=items_sha256(plan.items),
        frozen_suite_sha256=frozen,
        seeds={"inputs": plan.settings.seed},
        timestamps={"harness_started": started_at},
        harness_source=source_state(here),
        python={"harness": platform.python_version()},
    )
    return part.model_dump(mode="json", exclude_none=True)


def merge_provenance(*parts: dict[str, Any]) -> dict[str, Any]:
    """Later parts win key by key; `timestamps` and `python` are merged, not replaced."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in (part or {}).items():
            if value is None:
                continue
            if key in ("timestamps", "python", "seeds") and isinstance(value, dict):
                out[key] = {**out.get(key, {}), **value}
            else:
                out[key] = value
    return out
