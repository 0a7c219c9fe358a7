"""results.jsonl on disk: written so that it can never be left half-written, read so that any
damage is found, named by its line, and set aside rather than lost.

Writing. Each record is one write of the whole line, then fsync. If the write or the sync
fails (a full disk, a quota, an I/O error), the file is cut back to where it ended before: it
always ends at a complete line, and the caller gets a `WriteFailed` that says what happened
(for a full disk: how many bytes were needed and how many are free). A file that ends in a
fragment anyway (a kill -9 in the middle of a write, an older tool) is repaired before the next
record goes in: the fragment is moved to the side file, never glued to the next record.

Reading. `scan` sorts every line into records, damaged lines (with their numbers) and a trailing
fragment; `repair` moves the damaged lines and the fragment into the side file
(`results.rejected.jsonl`, one JSON object per rejected piece: line number, reason, the raw
text) and rewrites the file atomically, so the kernels they held are simply measured again.

Compressed. Published runs and committed evidence keep `results.jsonl.gz` (gzip) instead: every reader
takes `folder/results.jsonl` and reads the compressed copy where only that exists (`read_bytes`); writers
never append to one (a compressed run is finished: `deepbench-run --resume` refuses it, saying so).

Why by hand: no library offers append-only JSON Lines with per-record fsync and truncation on
error; the pieces are os.write, os.fsync and os.ftruncate, and their order is the point.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .format_versions import NewerFormat, read_model
from .results import KernelResult, ResultsFileError, utcnow

REJECTED_FILE = "results.rejected.jsonl"
COMPRESSED_SUFFIX = ".gz"  # a finished run's results stored compressed: results.jsonl.gz
TAIL_CHUNK = 1 << 16  # bytes read at a time when looking back for the last complete line
RECORD_START = b'{"schema_version"'  # how every record begins (KernelResult's first field)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class WriteFailed(Exception):
    """A record or document could not be written; the file holds what it held before."""

    def __init__(self, path: Path, exc: OSError, needed: int) -> None:
        self.path, self.errno, self.needed = path, exc.errno, needed
        self.free = free_bytes(path.parent)
        if exc.errno in NO_SPACE:
            what = "no space left on its disk" if exc.errno == errno.ENOSPC else "the disk quota is used up"
            text = (
                f"{what}: it needed {needed:,} bytes and {self.free:,} are free"
                if self.free is not None
                else f"{what}: it needed {needed:,} bytes"
            )
        else:
            text = exc.strerror or str(exc)
        super().__init__(f"could not write {path.name} ({text})")

    @property
    def no_space(self) -> bool:
        return self.errno in NO_SPACE


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem holding `folder`."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_atomic(path: Path, text: str | bytes) -> None:
    """Replace `path` by `text` whole or not at all: a temporary file beside it, synced, then
    renamed over it (rename is atomic within a filesystem). On failure (or an interruption) the
    old file is intact and the temporary one removed."""
    data = text.encode() if isinstance(text, str) else text
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise WriteFailed(path, exc, len(data)) from exc
        raise


def append_line(path: Path, line: bytes) -> None:
    """Append one complete line (ending in a newline) and sync it; on any error cut the file
    back to its previous end and raise WriteFailed. An interruption (a signal) keeps the line if
    it was written whole, else cuts it too."""
    assert line.endswith(b"\n")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise WriteFailed(path, exc, len(line)) from exc
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        end = _end_at_a_line(path, fd, end)
        try:
            _write_all(fd, line)
            os.fsync(fd)
        except BaseException as exc:
            if isinstance(exc, OSError) or os.lseek(fd, 0, os.SEEK_END) != end + len(line):
                try:
                    os.ftruncate(fd, end)
                    os.fsync(fd)
                except OSError:
                    pass
            if isinstance(exc, OSError):
                raise WriteFailed(path, exc, len(line)) from exc
            raise
    finally:
        os.close(fd)


def append_result(path: Path, result: KernelResult) -> None:
    """Append one record and force it to disk: an interruption never loses a finished kernel,
    and a failed write leaves no partial line."""
    append_line(path, (result.model_dump_json() + "\n").encode())


def _end_at_a_line(path: Path, fd: int, end: int) -> int:
    """Make the file end at a complete line before appending: a trailing fragment is moved to the
    side file and cut off (a complete record that lacks only its newline gets the newline).
    Returns the new end."""
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return end
    start = _last_line_start(fd, end)
    tail = os.pread(fd, end - start, start)
    if _parses(tail):
        _write_all(fd, b"\n")
        os.fsync(fd)
        return end + 1
    set_aside(path, [Rejected(None, "a partial last line (a write cut short)", tail)])
    os.ftruncate(fd, start)
    os.fsync(fd)
    return start


def _last_line_start(fd: int, end: int) -> int:
    pos = end
    while pos > 0:
        lo = max(0, pos - TAIL_CHUNK)
        chunk = os.pread(fd, pos - lo, lo)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return lo + i + 1
        pos = lo
    return 0


def _parses(raw: bytes) -> bool:

    try:
        read_model(KernelResult, raw)
        return True
    except ValueError:
        return False


# ----- reading and repair -------------------------------------------------------------------
@dataclass(frozen=True)
class Rejected:
    line: int | None  # 1-based line number; None for a trailing fragment
    reason: str
    raw: bytes


@dataclass
class Scan:
    """Every line of a results file, sorted."""

    records: list[tuple[int, KernelResult, bytes]] = field(default_factory=list)  # line, record, its bytes
    damaged: list[Rejected] = field(default_factory=list)
    fragment: Rejected | None = None
    salvaged: list[int] = field(default_factory=list)  # lines whose record was found behind a fragment

    @property
    def results(self) -> list[KernelResult]:
        return [r for _, r, _ in self.records]

    @property
    def clean(self) -> bool:
        return not self.damaged and self.fragment is None and not self.salvaged


def compressed(path: Path) -> Path:
    """Where the compressed copy of `path` is kept (results.jsonl -> results.jsonl.gz)."""
    return path.with_name(path.name + COMPRESSED_SUFFIX)


def only_compressed(path: Path) -> bool:
    """True where `path` is absent and its compressed copy is there (a published or archived run)."""
    return not path.exists() and compressed(path).is_file()


def exists(path: Path) -> bool:
    """`path` or its compressed copy is there."""
    return path.is_file() or only_compressed(path)


def read_bytes(path: Path) -> bytes:
    """The bytes of `path`, or of its compressed copy where only that exists (b"" where neither does)."""
    if path.exists():
        return gzip.decompress(path.read_bytes()) if path.name.endswith(COMPRESSED_SUFFIX) else path.read_bytes()
    if only_compressed(path):
        return gzip.decompress(compressed(path).read_bytes())
    return b""


def scan(path: Path) -> Scan:
    """Sort a results file's lines (its compressed copy where only that exists). A line that fails to
    parse but ends with a whole record (what an older tool left: a fragment with the next record
    appended to it) keeps that record. Records of every format version are read
    (kernels/format_versions.py); a line of a newer one raises NewerFormat, naming the file: it is
    not damage, and setting it aside would take it from the tool that can read it."""
    try:
        return _scan(path)
    except NewerFormat as exc:
        raise NewerFormat(f"{path.name}: {exc}") from None


def _scan(path: Path) -> Scan:

    out = Scan()
    data = read_bytes(path)
    lines = data.split(b"\n")
    last = lines.pop()  # after the final newline: b"" when the file ends at a complete line
    if last.strip():
        try:
            out.records.append((len(lines) + 1, read_model(KernelResult, last), last))
        except NewerFormat:
            raise
        except ValueError:
            out.fragment = Rejected(None, "a partial last line (a write cut short)", last)
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            out.records.append((n, read_model(KernelResult, raw), raw))
            continue
        except NewerFormat:
            raise
        except ValueError as exc:
            reason = _first_line(exc)
        behind = raw.rfind(RECORD_START)
        if behind > 0:
            try:
                out.records.append((n, read_model(KernelResult, raw[behind:]), raw[behind:]))
                out.salvaged.append(n)
                out.damaged.append(Rejected(n, "a partial record before a complete one", raw[:behind]))
                continue
            except ValueError:
                pass
        out.damaged.append(Rejected(n, reason, raw))
    out.records.sort(key=lambda x: x[0])
    return out


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(text[:3])[:300] if text else type(exc).__name__


def set_aside(path: Path, pieces: Iterable[Rejected]) -> Path:
    """Append rejected pieces to the side file beside `path` (never lost: the bytes are kept)."""

    side = path.with_name(REJECTED_FILE)
    at = utcnow().isoformat()
    for piece in pieces:
        doc = {
            "line": piece.line,
            "reason": piece.reason,
            "found_at": at,
            "from": path.name,
            "text": piece.raw.decode("utf-8", "backslashreplace"),
        }
        append_line(side, (json.dumps(doc) + "\n").encode())
    return side


def rewrite(path: Path, found: Scan) -> None:
    """Set aside what `found` rejected and write the file again with its records only (their
    bytes as they were), atomically."""
    pieces = list(found.damaged) + ([found.fragment] if found.fragment else [])
    set_aside(path, pieces)
    write_atomic(path, b"".join(raw.strip() + b"\n" for _, _, raw in found.records))


def read_results(path: Path) -> list[KernelResult]:
    """Validate every line of a results.jsonl. A partial last line (a write cut short) is left
    out; a damaged line elsewhere is an error naming it (`deepbench-run --resume` repairs it)."""
    found = scan(path)
    if found.damaged:
        bad = found.damaged[0]
        more = f" (and {len(found.damaged) - 1} more)" if len(found.damaged) > 1 else ""
        raise ResultsFileError(
            f"{path.name} line {bad.line} is damaged: {bad.reason}{more}; "
            f"deepbench-run --resume {path.parent} sets it aside and measures its kernel again"
        )
    return found.results
