"""Re-run a submission's plan on this machine and compare every kernel with the submitted numbers.

  deepbench verify BUNDLE --local                 # in a subprocess on this machine
  deepbench verify BUNDLE                         # in a container on this installation's own image
                                                  # (built here from the project's recipe; never the
                                                  # image the bundle names: a submission is data)
  deepbench verify BUNDLE --image REF             # an image deepbench built here from this checkout
  deepbench verify BUNDLE --local --tolerance 0.2 --noise-factor 3 --max-tolerance 1

Per kernel: agree when the ratio of medians is within
  min(--max-tolerance, max(--tolerance, --noise-factor x sqrt(rel_IQR_submitted^2 + rel_IQR_rerun^2)))
(defaults 100%, 10%, 3): a noisy kernel gets room in proportion to the noise both runs measured;
one whose combined relative IQR is over --max-noise (default 15%) is `unverifiable`, not agreed.
Kernels that did not agree, or whose re-run was noisy, are measured once more with longer
samples before judging. The bundle must pass `deepbench check` first. The re-run and
verify.json go to --out.

Exit status: 0 every kernel agrees; 1 some disagree or are unverifiable (or the bundle fails its
check); 2 usage error; 128 + the signal when stopped (Ctrl-C: 130)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UserError
from ..launch.running.signals import exit_status, stop_on_signals
from ..option_types import real
from ..render.display import make_console
from ..render.verify_render import print_verify
from ..submission.verify import (
    DEFAULT_CAP,
    DEFAULT_FLOOR,
    DEFAULT_MAX_NOISE,
    DEFAULT_NOISE_FACTOR,
    ToleranceRule,
    verify_bundle,
)

NAME = "verify"
HELP = "re-run a submission and compare with its numbers"
EXIT_DISAGREE = 1
MAX_RELATIVE = 1000.0  # a relative tolerance beyond 1000x is a typo


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", type=Path, metavar="BUNDLE", help="the folder deepbench submit wrote")
    parser.add_argument("--local", action="store_true", help="re-run in a subprocess on this machine, no container")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="folder for the re-run (default: ./deepbench-verify/RUN_ID-TIME)"
    )
    relative = real(0, MAX_RELATIVE)
    parser.add_argument(
        "--tolerance",
        type=relative,
        default=DEFAULT_FLOOR,
        metavar="REL",
        help=f"smallest relative difference allowed (default {DEFAULT_FLOOR:g})",
    )
    parser.add_argument(
        "--noise-factor",
        type=relative,
        default=DEFAULT_NOISE_FACTOR,
        metavar="K",
        help=f"room per unit of combined relative IQR (default {DEFAULT_NOISE_FACTOR:g})",
    )
    parser.add_argument(
        "--max-tolerance",
        type=relative,
        default=DEFAULT_CAP,
        metavar="REL",
        help=f"largest relative difference allowed, however noisy (default {DEFAULT_CAP:g})",
    )
    parser.add_argument(
        "--max-noise",
        type=relative,
        default=DEFAULT_MAX_NOISE,
        metavar="REL",
        help=f"a kernel whose combined relative IQR is above this is unverifiable (default {DEFAULT_MAX_NOISE:g})",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-kernel lines while re-running")
    parser.add_argument(
        "--image",
        metavar="REF",
        help="re-run in this image, present here and built here by deepbench images build from this "
        "checkout (proven by the id recorded at its build and the harness read out of it, never by its labels; "
        "default: the platform's own image, built here when missing). The image a bundle names is never "
        "pulled, loaded or run",
    )
    parser.add_argument(
        "--allow-modified",
        action="store_true",
        help="accept a bundle run from a modified source tree (deepbench check --allow-modified)",
    )


def run(args: argparse.Namespace) -> int:
    if args.max_tolerance < args.tolerance:
        raise UserError(f"--max-tolerance ({args.max_tolerance}) must be at least --tolerance ({args.tolerance})")
    console = make_console()
    rule = ToleranceRule(
        floor=args.tolerance, noise_factor=args.noise_factor, cap=args.max_tolerance, max_noise=args.max_noise
    )
    with stop_on_signals():
        try:
            result = verify_bundle(
                args.bundle,
                local=args.local,
                out=args.out,
                rule=rule,
                console=console,
                quiet=args.quiet,
                image=args.image,
                allow_modified=args.allow_modified,
            )
        except KeyboardInterrupt as exc:
            console.print("[yellow]interrupted: nothing was judged (what was re-run so far stays in its folder)[/]")
            return exit_status(exc)
    print_verify(console, result)
    return 0 if not result.disagree and not result.unverifiable else EXIT_DISAGREE
