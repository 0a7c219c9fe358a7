"""Reading an untrusted bundle's documents: strict JSON, strict schemas, bounded lines, one pass.

Every document is parsed strictly (no NaN or Infinity, no number that overflows a float, no duplicate
key) and validated against its versioned schema in pydantic's strict mode (a number or a boolean
written as a string is wrong, never converted); what is malformed becomes a problem with a message,
never a traceback. results.jsonl is read line by line with a bounded reader, one record at a time, as
the checks go through it: once. A line of the current format is validated from its own bytes (the
schema in strict JSON mode, by pydantic's Rust core), so that a 200 MB file of 10,000-sample records is
parsed once by the standard library (for duplicate keys and constants) and once by pydantic, and never
serialised again."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ...kernels.format_versions import FormatVersionError, upgrade
from ...kernels.results import DERIVED_KEYS, RESULT_SCHEMA, KernelResult, ResultFields, drop_derived
from . import layout
from .check_report import Report
from .layout import Limits

M = TypeVar("M", bound=BaseModel)
INVALID: Any = object()  # what _parse returns for bytes that are not JSON (a JSON null is None)
RECORD_FIELDS = frozenset(ResultFields.model_fields)


class ResultWire(ResultFields):
    """A current-format record as written, its derived keys (op, set, params) let through: those are
    checked against the kernel by drop_derived, and any other key the schema lacks is refused by
    _wire_keys, so the strict validation can read the line's own bytes."""

    model_config = ConfigDict(frozen=True, extra="ignore")


def strict_json(text: str | bytes) -> Any:
    """The JSON value of `text`, refusing NaN and Infinity, numbers that overflow a float and
    duplicate keys (ValueError)."""

    def no_constants(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            keys = [k for k, _ in pairs]
            raise ValueError(f"duplicate key {next(k for k in keys if keys.count(k) > 1)!r}")
        return out

    value = json.loads(text, parse_constant=no_constants, object_pairs_hook=no_duplicates)
    _refuse_overflow(value)
    return value


def _refuse_overflow(value: Any) -> None:
    """Raise where a number overflowed to infinity (json reads 1e999 as inf). A list of numbers is
    summed at C speed first: only a list whose sum is not finite is looked at number by number."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"number {value} overflows a float")
    elif isinstance(value, dict):
        for v in value.values():
            if not isinstance(v, (str, int)):
                _refuse_overflow(v)
    elif isinstance(value, list):
        try:
            if math.isfinite(sum(value)):
                return
        except TypeError:  # not all numbers
            pass
        for v in value:
            if not isinstance(v, (str, int)):
                _refuse_overflow(v)


def parse(data: bytes, where: str, report: Report) -> Any:
    """The JSON value of a document, or INVALID (with a problem that names the document corrupt, and why)."""
    why = None
    try:
        return strict_json(data.decode("utf-8"))
    except UnicodeDecodeError:
        why = "is not UTF-8 text"
    except json.JSONDecodeError as exc:
        why = f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    except ValueError as exc:
        why = f"is not valid JSON ({exc})"
    except RecursionError:
        why = "is not valid JSON (nested too deeply)"
    report.add(where, f"{why}: the file is corrupt")
    return INVALID


def describe(exc: ValidationError, shown: int = 3) -> str:
    errors = exc.errors()
    text = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(document)'}: {e['msg']}" for e in errors[:shown])
    return text + (f" (and {len(errors) - shown} more)" if len(errors) > shown else "")


def validate(model: type[M], data: Any, schema: str, where: str, report: Report, raw: bytes | None = None) -> M | None:
    """`data` as `model` (None, with a problem, where it is not one). `raw`: the bytes `data` was parsed
    from, for a result of the current format (validated from them: _wire)."""
    if not isinstance(data, dict):
        found = "null" if data is None else type(data).__name__
        report.add(where, f"is not a JSON object (found {found}): the file is corrupt")
        return None
    if data.get("schema_version") != schema:  # an older version is read as the current one
        try:
            data = upgrade(data, schema)
        except FormatVersionError as exc:
            report.add(where, str(exc))
            return None
        raw = None
    try:
        if model is KernelResult and raw is not None:
            return _wire(data, raw)  # type: ignore[return-value]
        # Types first, in strict mode from the JSON text; then the document as the tool reads it.
        strict, typed = (ResultFields, drop_derived(data)) if model is KernelResult else (model, data)
        strict.model_validate_json(json.dumps(typed), strict=True)
        return model.model_validate(data)
    except ValidationError as exc:
        report.add(where, f"does not match its schema: {describe(exc)}")
    except (ValueError, TypeError, RecursionError) as exc:  # a validator that tripped on odd input
        report.add(where, f"does not match its schema: {exc}"[:500])
    return None


def _wire(data: dict[str, Any], raw: bytes) -> KernelResult:
    """A current-format record validated from its own bytes in strict mode, then read as a KernelResult
    (already validated: constructed, not validated again)."""
    extra = sorted(set(data) - RECORD_FIELDS - set(DERIVED_KEYS))
    if extra:
        raise ValueError(f"{extra[0]}: Extra inputs are not permitted")
    drop_derived(data)  # the derived keys must be the kernel's own
    wire = ResultWire.model_validate_json(raw, strict=True)
    present = set(data) & RECORD_FIELDS
    return KernelResult.model_construct(present, **{name: getattr(wire, name) for name in RECORD_FIELDS})


def load(
    root: Path, rel: str, model: type[M], schema: str, files: dict[str, int], limits: Limits, report: Report
) -> M | None:
    """One JSON document of the bundle (None, with a problem, where it cannot be read as `model`)."""
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
    data = parse(raw, rel, report)
    if data is INVALID:
        return None
    if isinstance(data, dict) and isinstance(data.get("schema_version"), str):
        report.bundle.written_as[rel] = data["schema_version"]
    return validate(model, data, schema, rel, report)


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


class ResultStream:
    """results.jsonl's valid records, read from the file as they are iterated, one at a time: the checker
    holds one record at a time, whatever the file's size (a 443 MB file once cost 1.77 GB held as a
    list). The first pass reports every invalid line (up to the limit) and says whether there was any
    (`valid`, None until a pass has ended); a later pass reads again, reporting nothing."""

    def __init__(self, path: Path, limits: Limits, report: Report) -> None:
        self.path, self.limits, self.report = path, limits, report
        self.valid: bool | None = None

    def __iter__(self) -> Iterator[KernelResult]:
        report = self.report if self.valid is None else Report(self.path)
        before = len(report.problems)
        yield from _stream_results(self.path, self.limits, report)
        if self.valid is None:
            self.valid = len(report.problems) == before


def _stream_results(path: Path, limits: Limits, report: Report) -> Iterator[KernelResult]:
    """The file's valid records one at a time (a problem for each invalid line, up to the limit)."""
    rel = layout.RESULTS
    bad = 0
    with path.open("rb") as f:
        for n, line in bounded_lines(f, limits.max_json_bytes):
            if line is not None and not line.strip():
                continue
            record = _record(n, line, limits, report)
            if record is None:
                bad += 1
                if bad > limits.max_reported_per_file:
                    report.problems.pop()
            else:
                yield record
    if bad > limits.max_reported_per_file:
        report.add(rel, f"... and {bad - limits.max_reported_per_file} more invalid lines")


def _record(n: int, line: bytes | None, limits: Limits, report: Report) -> KernelResult | None:
    """Line `n` as a result (None, with one problem, where it is not one)."""
    where = f"{layout.RESULTS} line {n}"
    if line is None:
        report.add(where, f"is over {limits.max_json_bytes} bytes")
        return None
    data = parse(line, where, report)
    if data is INVALID:
        return None
    if isinstance(data, dict) and isinstance(data.get("id"), str):
        where = f"{where} ({data['id'][:120]})"
    return validate(KernelResult, data, RESULT_SCHEMA, where, report, raw=line)
