"""The find-dbs backends keep their searches' findings in between runs: list, export, import.

  deepbench cache                           # each db: its folder, files, library keys, entries; the shipped one
  deepbench cache export lab.json           # every entry of this user's dbs, in one file
  deepbench cache import lab.json           # merged into this user's dbs (their own entries kept; --replace)
  deepbench cache import lab.json --folder DIR   # into another folder (a shared one, a backend's shipped db)

A db is a folder of JSON files, one per device model and library versions, under the user's cache folder
(XDG_CACHE_HOME/deepbench, or ~/.cache/deepbench) or where the backend's option names one; copying those
files into another machine's folder does what export and import do. Which backends keep one, and what they
keep, is what they declare (kernels/backends/contract/find_db.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...kernels.backends import declared
from ...kernels.backends.contract.find_db import FindDb, FindDbSpec, Refusal, export, import_document, read_export
from ..errors import UserError

NAME = "cache"
HELP = "list, export or import the find-dbs backends keep between runs (their searches' winners)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", nargs="?", choices=("list", "export", "import"), default="list", help="what to do (default: list)"
    )
    parser.add_argument("file", nargs="?", type=Path, help="export: the file to write; import: the file to read")
    parser.add_argument(
        "--folder",
        type=Path,
        help="the db's folder instead of the user's cache folder (a folder of one db kind, e.g. the one "
        "a backend's option names)",
    )
    parser.add_argument("--replace", action="store_true", help="import: replace entries the folder already holds")


def specs() -> dict[str, FindDbSpec]:
    """Every declared find-db, by kind (a kind two backends declare is listed once)."""
    return {d.find_db.kind: d.find_db for d in declared().values() if d.find_db is not None}


def user_dbs(folder: Path | None) -> dict[str, FindDb]:
    """The user's db of each declared kind; with `folder`, that folder for every kind."""
    return {kind: FindDb(folder or spec.user_folder(), kind) for kind, spec in specs().items()}


def run(args: argparse.Namespace) -> int:
    if args.action != "list" and args.file is None:
        raise UserError(f"deepbench cache {args.action} needs a FILE (the export file to {args.action[:-1]})")
    dbs = user_dbs(args.folder)
    if args.action == "export":
        entries, refused = export(list(dbs.values()), args.file)
        for line in refused:
            print(f"left out: {line}")
        print(f"{entries} entries of {len(dbs)} db kind(s) written to {args.file}")
        return 0
    if args.action == "import":
        try:
            done = import_document(read_export(args.file), dbs, replace=args.replace)
        except Refusal as exc:
            raise UserError(str(exc)) from None
        print(
            f"{done.added} entries added, {done.replaced} replaced, {done.kept} kept as the folder had them "
            f"({done.files} file(s) written)"
        )
        return 0
    for line in listing(dbs):
        print(line)
    return 0


def listing(dbs: dict[str, FindDb]) -> list[str]:
    """Each db's folder, its files' library keys and entries, its refused files; the shipped db beside it."""
    lines: list[str] = []
    for kind, spec in specs().items():
        lines.append(f"{kind}: {spec.what}")
        shelves = [("user", dbs[kind])] + ([("shipped", FindDb(spec.shipped, kind, False))] if spec.shipped else [])
        for label, db in shelves:
            documents, refused = db.documents()
            count = sum(len(d.entries) for d in documents)
            lines.append(f"  {label}: {db.folder} ({len(documents)} file(s), {count} entries)")
            for d in documents:
                key = ", ".join(f"{k} {v}" for k, v in sorted(d.library.items()))
                lines.append(f"    {len(d.entries):>6} entries  {key}")
            lines += [f"    refused: {line}" for line in refused]
    return lines or ["no backend declares a find-db"]
