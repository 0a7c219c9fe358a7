"""Bundle a finished run as a submission: system description (measured + your fields), plan,
results, run record, logs, a README with the exact command to reproduce, and a SHA-256 manifest
of every file. The bundle is checked as `deepbench check` would.

  deepbench submit deepbench-results/RUN --out my-submission \\
      --submitter "ACME Corp" --system-name "ACME X1 (2x Foo 9000)" --notes "BIOS 1.2, performance governor"

Exit status: 0 the bundle passes the check; 1 it was written but has problems; 2 usage error."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from pydantic import ValidationError

from ...kernels.system import VendorFields
from ..analysis.flagged import flagged_line
from ..analysis.sources import read_run_folder
from ..argv_text import require_text
from ..errors import UserError
from ..outpaths import writable_folder
from ..render.display import make_console
from ..render.shell_lines import command, option_units
from ..submission.bundle import make_bundle
from ..submission.checker import check_bundle, describe
from ..submission.show import print_report

NAME = "submit"
HELP = "bundle a run as a submission (with a SHA-256 manifest)"
EXIT_PROBLEMS = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN", help="a finished deepbench-run results folder")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="the bundle folder to write")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace DIR if it holds a bundle deepbench submit "
        "wrote and nothing else (never a run, its parent or a folder with other files)",
    )
    i = parser.add_argument_group("the run's image, so that others can verify it (container runs)")
    i.add_argument(
        "--image-archive",
        type=Path,
        metavar="FILE",
        help="write the image to FILE (.tar or .tar.gz; "
        "kept beside the bundle), or record FILE when deepbench images export made it already",
    )
    i.add_argument(
        "--push", metavar="REF", help="push the image to a registry as REF (REGISTRY/REPO:TAG) and record it by digest"
    )
    v = parser.add_argument_group("vendor fields (typed in, never measured)")
    v.add_argument("--submitter", help="who submits")
    v.add_argument("--system-name", help="the system's name as the vendor sells it")
    v.add_argument("--notes", help="anything a reader needs: BIOS, power settings, cooling ...")
    v.add_argument(
        "--vendor-file",
        type=Path,
        metavar="JSON",
        help='the same as a JSON object: {"submitter": ..., "system_name": ..., "notes": ...}',
    )


def vendor_fields(args: argparse.Namespace) -> VendorFields:
    data: dict = {}
    if args.vendor_file:
        try:
            data = json.loads(args.vendor_file.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read --vendor-file {args.vendor_file}: {exc}") from None
        if not isinstance(data, dict):
            raise UserError(f"--vendor-file {args.vendor_file} must hold a JSON object")
    for key in ("submitter", "system_name", "notes"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    for key, value in data.items():  # a JSON escape (\udcff) makes text no UTF-8 writer takes
        if isinstance(value, str):
            require_text(value, f"vendor field {key}")
    try:
        return VendorFields.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"vendor fields: {describe(exc)} (allowed: submitter, system_name, notes)") from None


def run(args: argparse.Namespace) -> int:
    console = make_console()
    vendor = vendor_fields(args)
    if args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out} is a file, not a folder: give a folder (it is created if missing)")
    # The bundle is written beside DIR, then renamed DIR: its parent must be writable.
    writable_folder(args.out.parent if str(args.out.parent) else Path("."))
    index = make_bundle(
        args.run_dir,
        args.out,
        vendor,
        force=args.force,
        image_archive=args.image_archive,
        push_to=args.push,
        log=lambda line: console.print(line, highlight=False, markup=False),
    )
    console.print(f"wrote submission {index.run_id} to {args.out}", highlight=False, markup=False)
    console.print("reproduce with:", highlight=False)
    reproduce = command(option_units(shlex.split(index.reproduce)), console.width)
    console.print(reproduce, highlight=False, markup=False, soft_wrap=True)  # broken only between its words
    console.print(flagged_line(read_run_folder(args.run_dir)[0]), highlight=False, markup=False)
    return 0 if print_report(console, check_bundle(args.out)) else EXIT_PROBLEMS
