"""A find-db: what a backend's search found, kept between runs, so that the next run on the same kind of
device and libraries races only what the last one found fastest.

MIOpen's Find-Db is the model: a system db shipped with the package for the devices measured (read only;
a run says when it took an entry from it, and still races what the entry names) and a per-user db that
takes precedence and records every find. Here a db is a folder of JSON files, one per *library key*
(the device model and every library version the entries were found with), each holding entries by an
*entry key* (the problem). An entry is never read under another library key: a file is named after its
key and holds it, and a file whose key, kind or format is not the one asked for is refused, as is a file
that does not parse. A refused file is one line (`Refusal`): the caller says it where the run's facts or
the result's info carry it, and searches as if there were no entry; the file is left as it is, and no
entry is recorded into it (the user removes or replaces it).

Writes are atomic (a temporary file in the same folder, then os.replace) under an advisory lock
(fcntl.flock on a `.lock` file beside it), and merge into what the file holds by then: a race apart, a
second run on the same machine or a shared folder lose no entry. `export` writes every file of a db into
one JSON document and `import_document` merges such a document into a folder (the folder's own entries
kept where both hold one, unless asked to replace): how a lab shares one, or fills a shipped db.

The user's folder is XDG_CACHE_HOME/deepbench (~/.cache/deepbench where it is unset), one subfolder per
db kind. Free of any library: the host's `deepbench cache` command reads the same files."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

FORMAT: Literal["deepbench.find-db/1"] = "deepbench.find-db/1"
EXPORT_FORMAT: Literal["deepbench.find-db-export/1"] = "deepbench.find-db-export/1"
CACHE_HOME_ENV = "XDG_CACHE_HOME"
CACHE_FOLDER = "deepbench"  # under the user's cache home
SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
SLUG_CHARS = 80  # the readable part of a file's name; a hash of the whole key follows it
HASH_CHARS = 12
UNSAFE = re.compile(r"[^A-Za-z0-9.]+")

try:  # advisory locks where the platform has them (Linux, macOS); elsewhere the atomic replace alone
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms the GPU backends run on
    fcntl = None  # type: ignore[assignment]


def user_cache_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """The user's cache folder for deepbench: XDG_CACHE_HOME/deepbench, else ~/.cache/deepbench (a process with
    no home, as some containers run, the temporary folder's deepbench-cache instead)."""
    home = environ.get(CACHE_HOME_ENV)
    if not home:
        try:
            home = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no password entry for the user
            return Path(tempfile.gettempdir()) / f"{CACHE_FOLDER}-cache"
    return Path(home).expanduser() / CACHE_FOLDER


@dataclass(frozen=True)
class FindDbSpec:
    """What a backend declares of its find-db (declaration.py `find_db`): its kind (its files' `kind`, its
    subfolder of the user's cache folder), what it keeps (help text, listings), and the folder of the
    system db shipped with the package (None: it ships none)."""

    kind: str
    what: str
    shipped: Path | None = None

    def user_folder(self, environ: Mapping[str, str] = os.environ) -> Path:
        return user_cache_folder(environ) / self.kind


class Document(BaseModel):
    """One db file: its format, kind, library key and entries by entry key."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["deepbench.find-db/1"]
    kind: str
    library: dict[str, str]
    entries: dict[str, dict[str, Any]]


class ExportDocument(BaseModel):
    """Every file of one or more dbs, as `export` writes them."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["deepbench.find-db-export/1"]
    documents: list[Document]


class Refusal(ValueError):
    """A db file that cannot be used: one line naming it and why."""


def file_name(kind: str, library: Mapping[str, str]) -> str:
    """The file a library key's entries live in: its values, readable, then a hash of the whole key."""
    readable = UNSAFE.sub("-", "-".join(str(library[k]) for k in sorted(library))).strip("-")[:SLUG_CHARS]
    digest = hashlib.sha256(json.dumps({"kind": kind, **library}, sort_keys=True).encode()).hexdigest()
    return f"{readable}-{digest[:HASH_CHARS]}{SUFFIX}"


def read_document(path: Path, kind: str, library: Mapping[str, str] | None = None) -> Document:
    """The document at `path`, checked to be a `kind` db (and of `library` where given); Refusal otherwise."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise Refusal(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    except json.JSONDecodeError as exc:
        raise Refusal(f"{path}: not JSON ({exc.msg} at line {exc.lineno}): corrupt") from None
    try:
        document = Document.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the file"
        raise Refusal(f"{path}: not a {FORMAT} file ({where}: {first['msg']})") from None
    if document.kind != kind:
        raise Refusal(f"{path}: a {document.kind!r} db, not {kind!r}: foreign")
    if library is not None and document.library != dict(library):
        raise Refusal(f"{path}: written for {_key_text(document.library)}, not {_key_text(library)}: foreign")
    return document


def _key_text(library: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {library[k]}" for k in sorted(library))


@dataclass
class Lookup:
    """What a db holds for an entry key: the entry (None: none), the file it came from, and a refusal line."""

    entry: dict[str, Any] | None = None
    path: Path | None = None
    refused: str = ""


@dataclass
class FindDb:
    """One folder of db files of one kind; read-only for a shipped db."""

    folder: Path
    kind: str
    writable: bool = True
    _read: dict[str, Document | Refusal | None] = field(default_factory=dict, repr=False)
    _written: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)  # file -> (mtime_ns, size)

    def path_for(self, library: Mapping[str, str]) -> Path:
        return self.folder / file_name(self.kind, library)

    def _document(self, library: Mapping[str, str]) -> Document | Refusal | None:
        """The file for `library` as read once per process (None: there is none)."""
        path = self.path_for(library)
        name = path.name
        if name not in self._read:
            try:
                self._read[name] = read_document(path, self.kind, library) if path.exists() else None
            except Refusal as exc:
                self._read[name] = exc
        return self._read[name]

    def refusal(self, library: Mapping[str, str]) -> str:
        """Why the file for `library` cannot be used ('' where it can, or there is none)."""
        found = self._document(library)
        return str(found) if isinstance(found, Refusal) else ""

    def lookup(self, library: Mapping[str, str], key: str) -> Lookup:
        found = self._document(library)
        if isinstance(found, Refusal):
            return Lookup(refused=str(found))
        if found is None or key not in found.entries:
            return Lookup()
        return Lookup(found.entries[key], self.path_for(library))

    def record(self, library: Mapping[str, str], key: str, entry: Mapping[str, Any]) -> str:
        """Keep `entry` under `key` (with the time it was recorded); a refusal line where the file cannot
        take it ('' where it did)."""
        if not self.writable:
            return f"{self.folder}: a shipped db, read only"
        path = self.path_for(library)
        stamped = {**entry, "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        try:
            with self._locked(path):
                current = self._current(path, library)
                document = (
                    current
                    if current is not None
                    else Document(format=FORMAT, kind=self.kind, library=dict(library), entries={})
                )
                document.entries[key] = stamped
                write_atomic(path, document)
                stat = path.stat()
                self._written[path.name] = (stat.st_mtime_ns, stat.st_size)
        except Refusal as exc:
            self._read[path.name] = exc
            return f"{exc}; not recorded (remove the file to record again)"
        except OSError as exc:
            return f"{path}: cannot be written ({exc.__class__.__name__}: {exc}); not recorded"
        self._read[path.name] = document
        return ""

    def _current(self, path: Path, library: Mapping[str, str]) -> Document | None:
        """The file as it is now (under the lock): what this process last wrote where nobody wrote since (a
        suite's hundreds of records need not parse it each time), else read again."""
        if not path.exists():
            return None
        stat = path.stat()
        known = self._read.get(path.name)
        if isinstance(known, Document) and self._written.get(path.name) == (stat.st_mtime_ns, stat.st_size):
            return known
        return read_document(path, self.kind, library)

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(LOCK_SUFFIX), "a") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def documents(self) -> tuple[list[Document], list[str]]:
        """Every file of the folder that is a db of this kind, and a refusal line for each other one."""
        found, refused = [], []
        for path in sorted(self.folder.glob(f"*{SUFFIX}")) if self.folder.is_dir() else []:
            try:
                document = read_document(path, self.kind)
            except Refusal as exc:
                refused.append(str(exc))
                continue
            if path.name != file_name(self.kind, document.library):
                refused.append(f"{path}: named otherwise than its library key ({_key_text(document.library)})")
                continue
            found.append(document)
        return found, refused


def write_atomic(path: Path, document: BaseModel) -> None:
    """Write `document` to `path` in one step: a temporary file beside it, then os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(document.model_dump_json() + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def export(dbs: list[FindDb], out: Path) -> tuple[int, list[str]]:
    """Every usable file of `dbs` into one document at `out`: the entries written, and refusal lines."""
    documents: list[Document] = []
    refused: list[str] = []
    for db in dbs:
        found, bad = db.documents()
        documents += found
        refused += bad
    write_atomic(out, ExportDocument(format=EXPORT_FORMAT, documents=documents))
    return sum(len(d.entries) for d in documents), refused


@dataclass
class Imported:
    """What an import did: entries added, entries replaced, entries the folder kept, files written."""

    added: int = 0
    replaced: int = 0
    kept: int = 0
    files: int = 0


def read_export(path: Path) -> ExportDocument:
    """An exported document (Refusal: not one)."""
    try:
        return ExportDocument.model_validate_json(path.read_text())
    except OSError as exc:
        raise Refusal(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the file"
        raise Refusal(f"{path}: not a {EXPORT_FORMAT} file ({where}: {first['msg']})") from None


def import_document(exported: ExportDocument, dbs: Mapping[str, FindDb], replace: bool = False) -> Imported:
    """Merge an exported document into the dbs of its documents' kinds (`dbs`: kind -> db); kinds without a
    db here are left out. A file of the folder that is refused stops the import (Refusal)."""
    done = Imported()
    for document in exported.documents:
        db = dbs.get(document.kind)
        if db is None:
            continue
        path = db.path_for(document.library)
        with db._locked(path):
            current = read_document(path, db.kind, document.library) if path.exists() else None
            merged = (
                current
                if current is not None
                else Document(format=FORMAT, kind=db.kind, library=document.library, entries={})
            )
            for key, entry in document.entries.items():
                if key not in merged.entries:
                    done.added += 1
                elif replace:
                    done.replaced += 1
                else:
                    done.kept += 1
                    continue
                merged.entries[key] = entry
            write_atomic(path, merged)
        done.files += 1
    return done
