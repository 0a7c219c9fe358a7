"""Several harness ranks on one node, started by an existing engine (`--ranks N`).

All-reduce needs one process per GPU (or N CPU processes). We do not write a launcher: the MPI
backend's ranks are started by `mpiexec` (MPICH's or Open MPI's, from the pip wheel beside this
Python or the system's), the torch.distributed backends' (gloo, NCCL, RCCL) by `torchrun`. Every
rank runs the same harness on the same plan; rank 0 writes the run's results and prints the
events the host reads, the others write their own records under OUT/ranks/rank-K/ (harness
__main__). The figures merge through the communicator itself: each rank's time per call is
gathered on every rank, and rank 0 records the mean and max over ranks.

A kernel that hangs one rank holds the others in the collective: the supervisor's per-kernel
timeout then kills the whole process tree (the engine and every rank: torchrun starts its
workers in sessions of their own, so a process-group kill alone would miss them) and records
the kernel as `timeout`; a rank that dies takes the engine down with it and the kernel is
recorded as `failed`. Either way the next start skips what is done."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from deepbench.kernels.backends import declaration_of, declared
from deepbench.kernels.backends.contract.declaration import Launcher
from deepbench.kernels.catalog import operations, traits_of
from deepbench.kernels.harness.record import read_facts

from ..errors import UserError
from ..option_types import integer
from ..setting_ranges import MAX_RANKS
from .local import HARNESS_MODULE, LOG_FILE, LocalHarness

KILL_GRACE_S = 3.0
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


def with_ranks(options: dict, plan) -> dict:  # docker create options (runner/launch/container.py), Plan
    """Container options that start the plan's ranks under their engine instead of one harness."""
    entrypoint, env = container_entrypoint(plan.backend, plan.settings.ranks)
    options["entrypoint"] = entrypoint
    # The ranks meet on the loopback: with no network the container's own name does not resolve,
    # and torchrun's rendezvous and gloo look it up; "localhost" is in every /etc/hosts.
    options["hostname"] = "localhost"
    options["environment"] = {**options.get("environment", {}), **env}
    return options


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children first found first."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class RankedHarness(LocalHarness):
    """N harness ranks under an engine: the HarnessProcess protocol (supervise.py). Killing must
    reach every rank, wherever the engine put them (their own sessions included)."""

    def __init__(
        self,
        backend: str,
        ranks: int,
        plan_path: Path,
        outdir: Path,
        threads: int | None,
        env: dict[str, str] | None = None,
        launch: str | None = None,
    ) -> None:
        """`launch`: the user's engine command across nodes (launched_argv) instead of this node's."""
        argv, engine_env = (
            launched_argv(launch, plan_path, outdir) if launch else launch_argv(backend, ranks, plan_path, outdir)
        )
        log = outdir / LOG_FILE  # appended to by every start: this start's part begins here
        self.log_offset = log.stat().st_size if log.exists() else 0
        # N ranks share the cores: one thread each unless the user said otherwise (torchrun's default too).
        threads_env = {"OMP_NUM_THREADS": str(threads or 1)} if "OMP_NUM_THREADS" not in os.environ else {}
        super().__init__(plan_path, outdir, {**threads_env, **engine_env, **(env or {})}, argv=argv)

    def casualty(self) -> str:
        """The rank the engine says ended first (by task for srun, by pid for MPICH's Hydra), for
        a kernel that died or hung with it: no rank may be left to say which ('' if unsaid)."""
        self._log.flush()
        with open(self.log_path, "rb") as f:
            f.seek(self.log_offset)
            mine = f.read().decode(errors="replace")
        return engine_casualty(mine, read_facts(self.log_path.parent).get("device", {}))

    def kill(self) -> None:
        tree = descendants(self.proc.pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in [self.proc.pid, *tree]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if sig == signal.SIGTERM:
                deadline = time.monotonic() + KILL_GRACE_S
                while time.monotonic() < deadline and any(process_alive(p) for p in [self.proc.pid, *tree]):
                    time.sleep(0.1)


# "srun: error: dbn2: task 3: Killed", "srun: error: dbn1: tasks 0-1: Exited with exit code 3"
SRUN_ENDED = re.compile(r"srun: error: (\S+): tasks? ([\d,-]+): (.+)")
# MPICH's Hydra: "=   PID 8434 RUNNING AT dbn2" then "=   EXIT CODE: 9"
HYDRA_ENDED = re.compile(r"PID (\d+) RUNNING AT (\S+)\s*\n=\s*EXIT CODE: (\d+)")


def engine_casualty(log: str, device: dict) -> str:
    """The first rank the engine reported ended, with its host and how ('' where none is), from
    srun's task numbers or from Hydra's pid, mapped to a rank by the pids rank 0 recorded."""
    ended = SRUN_ENDED.search(log)
    if ended:
        host, tasks, how = ended.groups()
        return f"srun reports {'rank' if tasks.isdigit() else 'ranks'} {tasks} on {host} first: {how.strip()}"
    ended = HYDRA_ENDED.search(log)
    if ended:
        pid, host, code = int(ended.group(1)), ended.group(2), int(ended.group(3))
        pids = device.get("rank_pids") or []
        who = f"rank {pids.index(pid)}" if pid in pids else f"the process {pid}"
        return f"mpiexec reports {who} on {host} first: exit code {code}"
    return ""


def process_alive(pid: int) -> bool:
    """Whether the process runs (a zombie, exited but not reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# ----- command line ---------------------------------------------------------------------------
def add_rank_arguments(parser) -> None:  # argparse.ArgumentParser
    engines = "; ".join(f"{engine} (--backend {'/'.join(names)})" for engine, names in collective_backends().items())
    g = parser.add_argument_group("collectives (all-reduce, all-gather, ...: --suite collectives)")
    g.add_argument(
        "--ranks",
        type=integer(1, MAX_RANKS),
        default=1,
        metavar="N",
        help="processes for the collectives on this node: one per GPU, or N CPU processes (default 1); "
        f"started by {engines}; the platform's backend picks its device's collective backend",
    )
    g.add_argument(
        "--launch",
        metavar="COMMAND",
        help="with --resume OUT: start the ranks across nodes with COMMAND, as `deepbench "
        "launch-command` prints it (srun/mpirun ... -m deepbench.kernels.harness PLAN OUT), "
        "with the progress, per-kernel timeout and restarts of a local run",
    )


def plan_backend(backend: str, ranks: int, platform, kernels) -> str:  # (Platform, list[Kernel])
    """The backend a plan names for `backend` (asked for, or the platform's) on `ranks` ranks.
    Several ranks run the collectives only, on a collective backend: the one asked for, or the one
    the backend's declaration names for the platform's device (NCCL on GPUs, gloo on CPUs ...)."""
    if ranks < 1:
        raise UserError(f"--ranks must be at least 1, not {ranks}")
    if ranks == 1:
        return backend
    others = sorted({k.op for k in kernels if not traits_of(k.op).collective})
    if others:
        collectives = ",".join(op for op in operations() if traits_of(op).collective)
        raise UserError(
            f"--ranks {ranks} runs collectives only, and the selection also has {', '.join(others)}: "
            f"add --ops {collectives}"
        )
    declared_ = declaration_of(backend)
    if declared_.launcher is not None:
        return backend
    collective = declared_.collective_backend(platform.device)
    if collective:
        return collective
    names = ", ".join(name for names in collective_backends().values() for name in names)
    raise UserError(f"--ranks needs a collective backend: {names} (not {backend})")


def needs_engine(plan) -> bool:  # Plan
    """Whether the harness must be started by an engine (several ranks, or a backend whose engine
    starts even one rank)."""
    launcher = declaration_of(plan.backend).launcher
    return plan.settings.ranks > 1 or (launcher is not None and launcher.always)
