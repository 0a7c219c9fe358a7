"""Every version of the result, run and plan formats this tool ever wrote, read by one function.

A document names its format in `schema_version` ("deepbench.result/2"). The models in
kernels/results.py describe the current version only, with extra="forbid"; a file of an older
version is brought up to the current one here, on its raw JSON, by a chain of upgrade steps (one
per version: /1 -> /2, then /2 -> /3 ...), before pydantic validates it. So a bundle submitted
today is read by every later checker, as pyperf reads every JSON version it ever wrote.

What each version was (tests/fixtures/formats/ holds a real file of each shape, from the
published runs' history):
- /1 (2026-11-22 to the backend plug-ins): fields were only ever added, each with a default, so
  a /1 file of any age is read as /1 was last written. Settings held cuDNN's `engine_race` and
  `cudnn_engines` and NCCL's `collective_timing` at their top level.
- /2: those three live under `settings.backend_options.<backend>`, the settings each backend
  declares for itself; results did not change shape (their tag did, with the others').

A file of a newer version than this tool reads, or one with no or another tag, is an error of its
own (`FormatVersionError`), one line that says what to do: never read as damage.

Why by hand: pydantic validates one shape; moving keys between versions is a few dict
operations, kept beside the versions they bridge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from .results import PLAN_SCHEMA, RESULT_SCHEMA, RUN_SCHEMA

M = TypeVar("M", bound=BaseModel)
Document = dict[str, Any]
TAG = re.compile(r"(?P<family>deepbench\.[a-z]+)/(?P<version>[1-9][0-9]*)")

# Settings keys of /1 that /2 keeps under settings.backend_options.<backend>.<key>.
V1_BACKEND_SETTINGS: Final = {
    "engine_race": ("cudnn", "engine_race"),
    "cudnn_engines": ("cudnn", "engines"),
    "collective_timing": ("nccl", "collective_timing"),
}


class FormatVersionError(ValueError):
    """A document whose format this tool cannot read: no tag, another format's, or a newer version."""


class NewerFormat(FormatVersionError):
    """A document written by a newer deepbench (a version above the current one)."""


def _backend_options_v2(settings: Document) -> Document:
    """/1 -> /2 settings: cuDNN's and NCCL's top-level keys moved under backend_options (a key
    absent stays absent, so its default applies)."""
    out = dict(settings)
    options: dict[str, Document] = {k: dict(v) for k, v in out.get("backend_options", {}).items()}
    for old, (backend, key) in V1_BACKEND_SETTINGS.items():
        if old in out:
            options.setdefault(backend, {})[key] = out.pop(old)
    if options:
        out["backend_options"] = options
    return out


def _settings_v2(doc: Document) -> Document:
    if isinstance(doc.get("settings"), dict):
        return {**doc, "settings": _backend_options_v2(doc["settings"])}
    return doc


def _unchanged(doc: Document) -> Document:
    return doc


# Per format, the step from version i + 1 to i + 2 at index i: a new version appends its step here.
UPGRADES: Final[dict[str, tuple[Callable[[Document], Document], ...]]] = {
    "deepbench.result": (_unchanged,),
    "deepbench.run": (_settings_v2,),
    "deepbench.plan": (_settings_v2,),
}


def _split(tag: str) -> tuple[str, int]:
    match = TAG.fullmatch(tag)
    if match is None:
        raise ValueError(tag)
    return match["family"], int(match["version"])


CURRENT: Final = dict(_split(tag) for tag in (RESULT_SCHEMA, RUN_SCHEMA, PLAN_SCHEMA))
assert all(len(UPGRADES[family]) == version - 1 for family, version in CURRENT.items()), "a version lacks its step"


def upgrade(data: Any, current: str) -> Document:
    """`data` (a parsed JSON document) as version `current` of its format ("deepbench.plan/2"),
    whichever earlier version wrote it; a FormatVersionError where it is not one of them."""
    family, version = _split(current)
    what = family.removeprefix("deepbench.")
    if not isinstance(data, dict):
        raise FormatVersionError(f"is not a JSON object (found {type(data).__name__}), not a deepbench {what}")
    tag = data.get("schema_version")
    if tag is None:
        raise FormatVersionError(f"has no schema_version: not a deepbench {what} file")
    match = TAG.fullmatch(tag) if isinstance(tag, str) else None
    if match is None or match["family"] != family:
        raise FormatVersionError(
            f"schema_version {tag!r} is not a deepbench {what} format (this one reads {family}/1 to /{version})"
        )
    found = int(match["version"])
    if found > version:
        raise NewerFormat(f"written by a newer deepbench ({tag}; this one reads up to /{version}): upgrade deepbench")
    if found == version:
        return data
    steps = UPGRADES.get(family)
    if steps is None:  # a format with no steps here (system, submission): its current version only
        raise FormatVersionError(f"schema_version {tag!r} is not one this deepbench reads (it reads {current})")
    for step in steps[found - 1 : version - 1]:
        data = step(data)
    return {**data, "schema_version": current}


def current_tag(model: type[BaseModel]) -> str:
    """The format version a model reads and writes (its schema_version's default)."""
    return str(model.model_fields["schema_version"].default)


def read_model(model: type[M], raw: str | bytes, where: str = "") -> M:
    """A document of any version this tool wrote, validated as `model` (Plan, RunRecord,
    KernelResult). A document of the current version goes straight to pydantic's JSON parser;
    an older one is parsed, upgraded, then validated. Errors are ValueErrors (a FormatVersionError
    for the version), prefixed with `where` when given."""
    tag = current_tag(model)
    head = raw[:80] if isinstance(raw, bytes) else raw[:80].encode()
    if head.startswith(b'{"schema_version":"' + tag.encode() + b'"'):  # what this version writes
        return model.model_validate_json(raw)
    try:
        return model.model_validate(upgrade(json.loads(raw), tag))
    except FormatVersionError as exc:
        raise type(exc)(f"{where}: {exc}" if where else str(exc)) from None
