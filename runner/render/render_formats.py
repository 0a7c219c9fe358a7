"""The registry of output formats: a format is one module that registers a `ReportFormat`.

A format writes some of the three documents the host renders: a report of one source
(`deepbench report`), a comparison (`deepbench compare`) and the fastest-per-kernel tables
(`deepbench fastest`). The commands take their `--format` choices from here and hand the
document to the format's writer, so a new format is a module that calls `register_format`
(the built-in ones are listed in BUILTIN_MODULES and loaded on first use, plotly and openpyxl
only when their format is asked for).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

REPORT, COMPARE, FASTEST = "report", "compare", "fastest"
DOCUMENTS = (REPORT, COMPARE, FASTEST)
# Terminal tables first (each command's default), then the file formats.
BUILTIN_MODULES = tuple(f"deepbench.runner.render.format_{name}" for name in ("table", "md", "csv", "xlsx", "html"))
DEFAULT_FORMAT = "table"

# A writer takes the document's parts (see each command) and `out` (None: standard output, or
# the format's default file) and returns the path it wrote, if any.
Writer = Callable[..., "str | None"]


@dataclass(frozen=True)
class ReportFormat:
    """`writers`: document name (REPORT, COMPARE, FASTEST) -> its writer; a format leaves out
    the documents it cannot write (a workbook is a report only)."""

    name: str
    writers: dict[str, Writer]
    help: str = ""


_FORMATS: dict[str, ReportFormat] = {}
_loaded = False


def register_format(fmt: ReportFormat) -> ReportFormat:
    unknown = set(fmt.writers) - set(DOCUMENTS)
    if unknown:
        raise ValueError(f"format {fmt.name}: unknown documents {', '.join(sorted(unknown))} (known: {DOCUMENTS})")
    _FORMATS[fmt.name] = fmt
    return fmt


def unregister_format(name: str) -> None:
    _FORMATS.pop(name, None)


def formats() -> dict[str, ReportFormat]:
    """Every registered format, the built-in ones first (loaded here on first use)."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            import_module(module)
    return _FORMATS


def choices(document: str) -> tuple[str, ...]:
    """The formats that write `document`: a command's --format choices."""
    return tuple(name for name, f in formats().items() if document in f.writers)


def write(document: str, fmt: str, *parts: Any, **options: Any) -> str | None:
    """Write `document` in format `fmt`: the writer's return (the path written, if any)."""
    found = formats().get(fmt)
    if found is None or document not in found.writers:
        raise ValueError(f"no {fmt} writer for a {document} (choose from: {', '.join(choices(document))})")
    return found.writers[document](*parts, **options)


def emit(text: str, out: Path | None) -> str | None:
    """Text to `out`, or to standard output when None; the path written, if any."""
    if out is None:
        print(text, end="")
        return None
    out.write_text(text)
    return str(out)
