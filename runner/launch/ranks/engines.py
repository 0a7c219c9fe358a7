"""The engines that start several harness ranks on one node (`--ranks N`) or across nodes (`--launch`).

All-reduce needs one process per GPU (or N CPU processes). We do not write a launcher: the MPI
backend's ranks are started by `mpiexec` (MPICH's or Open MPI's, from the pip wheel beside this
Python or the system's), the torch.distributed backends' (gloo, NCCL, RCCL) by `torchrun`; which
engine starts a backend's ranks is its declaration's `launcher`. Here: the engine's command line on
this node, a cluster engine's command checked to run this plan, and the engine as a container's
entrypoint (every rank of the node in one container)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepbench.kernels.backends import declaration_of, declared
from deepbench.kernels.backends.contract.declaration import Launcher

from ...errors import UserError
from ..running.local import HARNESS_MODULE

if TYPE_CHECKING:
    from deepbench.kernels.results import Plan

MPIEXEC_NAMES = ("mpiexec", "mpirun")


def launcher_of(backend: str) -> Launcher:
    """The engine that starts `backend`'s ranks, as its declaration says (a plan with several ranks
    names a collective backend: plan_backend)."""
    launcher = declaration_of(backend).launcher
    if launcher is None:
        raise UserError(f"the {backend} backend runs as one process: it has no ranks to start")
    return launcher


def collective_backends() -> dict[str, list[str]]:
    """Each engine's name and the collective backends whose ranks it starts (help text, errors)."""
    out: dict[str, list[str]] = {}
    for name, declared_ in declared().items():
        if declared_.launcher is not None:
            out.setdefault(declared_.launcher.name, []).append(name)
    return out


def find_mpiexec(hint: str = "") -> str:
    """The mpiexec beside this Python first (a pip wheel's: the MPI mpi4py loads here), then PATH.
    `hint`: what to install, said where none is found."""
    here = os.path.dirname(sys.executable)
    for name in MPIEXEC_NAMES:
        found = shutil.which(name, path=here) or shutil.which(name)
        if found:
            return found
    raise UserError(f"no mpiexec or mpirun here: {hint or 'install an MPI library with its launcher'}")


def mpiexec_flavour(mpiexec: str) -> tuple[str, str]:
    """('mpich' | 'openmpi' | 'unknown', version) from `mpiexec --version`."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", ""
    if "Open MPI" in out or "OpenRTE" in out or "prte" in out.lower():
        m = re.search(r"\(Open MPI\)\s*([\d.]+)", out) or re.search(r"([\d]+\.[\d.]+)", out)
        return "openmpi", m.group(1) if m else ""
    m = re.search(r"Version:\s*([\d.a-z]+)", out)
    return ("mpich" if "HYDRA" in out or "MPICH" in out else "unknown"), m.group(1) if m else ""


def launch_argv(
    backend: str, ranks: int, plan_path: Path, outdir: Path, python: str = sys.executable
) -> tuple[list[str], dict[str, str]]:
    """The engine's command line that starts `ranks` harness ranks on this node, and the
    environment it needs (also what a container runner runs inside the container)."""
    harness = [python, "-m", HARNESS_MODULE, str(plan_path), str(outdir)]
    launcher = launcher_of(backend)
    if not launcher.module:  # a program of its own: mpiexec
        mpiexec = find_mpiexec(declaration_of(backend).install_hint)
        flavour, version = mpiexec_flavour(mpiexec)
        extra = (
            ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) if flavour == "openmpi" else []
        )
        env = {"DEEPBENCH_LAUNCHER": f"{mpiexec} ({flavour} {version})".strip()}
        return [mpiexec, "-n", str(ranks), *extra, *harness], env
    argv = [
        python,
        "-m",
        launcher.module,
        "--standalone",
        f"--nproc-per-node={ranks}",
        "--max-restarts=0",
        "-m",
        HARNESS_MODULE,
        str(plan_path),
        str(outdir),
    ]
    return argv, {"DEEPBENCH_LAUNCHER": f"{launcher.name} --standalone --nproc-per-node={ranks}"}


def launched_argv(command: str, plan_path: Path, outdir: Path) -> tuple[list[str], dict[str, str]]:
    """A cluster engine's command that starts this plan's ranks (`--launch`, as `deepbench
    launch-command` prints it: srun, mpirun or mpiexec on the nodes), checked to run the harness
    on this run, and the launcher it names for the results."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UserError(f"--launch: {exc}") from None
    want = [str(plan_path.resolve()), str(outdir.resolve())]
    if HARNESS_MODULE not in argv:
        raise UserError(
            f"--launch must start the harness on this run: ... -m {HARNESS_MODULE} {shlex.join(want)} "
            "(deepbench launch-command prints the command)"
        )
    at = argv.index(HARNESS_MODULE)
    given = [str(Path(a).resolve()) for a in argv[at + 1 : at + 3]]
    if given != want:
        raise UserError(
            f"--launch runs the harness on {shlex.join(argv[at + 1 :])}, not on this run ({shlex.join(want)})"
        )
    return argv, {"DEEPBENCH_LAUNCHER": shlex.join(argv[: max(0, at - 2)])}  # the words before `python -m`


# The harness's Python in the platform images (images/*/Dockerfile: a venv at /opt/deepbench).
IMAGE_PYTHON = "/opt/deepbench/bin/python"


def container_entrypoint(backend: str, ranks: int, python: str = IMAGE_PYTHON) -> tuple[list[str], dict[str, str]]:
    """The engine inside a container: an entrypoint to which docker appends the plan and results
    paths (the container's command), so one container holds every rank of the node. An engine that is
    a program of its own (mpiexec) needs the image built with its package (beside the harness's
    Python); what the ranks need set in a container comes from the launcher's declaration."""
    launcher = launcher_of(backend)
    env = dict(launcher.container_env)
    if not launcher.module:
        mpiexec = str(Path(python).parent / MPIEXEC_NAMES[0])
        return [mpiexec, "-n", str(ranks), python, "-m", HARNESS_MODULE], {
            "DEEPBENCH_LAUNCHER": f"{mpiexec} (in the container)",
            **env,
        }
    return [
        python,
        "-m",
        launcher.module,
        "--standalone",
        f"--nproc-per-node={ranks}",
        "--max-restarts=0",
        "--local-addr=127.0.0.1",
        "-m",
        HARNESS_MODULE,
    ], {"DEEPBENCH_LAUNCHER": f"{launcher.name} --nproc-per-node={ranks} (in the container)", **env}


def with_ranks(options: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """Container options (images/container.py `run_options`) that start the plan's ranks under their
    engine instead of one harness."""
    entrypoint, env = container_entrypoint(plan.backend, plan.settings.ranks)
    options["entrypoint"] = entrypoint
    # The ranks meet on the loopback: with no network the container's own name does not resolve,
    # and torchrun's rendezvous and gloo look it up; "localhost" is in every /etc/hosts.
    options["hostname"] = "localhost"
    options["environment"] = {**options.get("environment", {}), **env}
    return options
