"""The harness as several ranks under an engine (`--ranks N`, `--launch`): one HarnessProcess for all.

Every rank runs the same harness on the same plan; rank 0 writes the
run's results and prints the events the host reads, the others write their own records under
OUT/ranks/rank-K/ (harness __main__). The figures merge through the communicator itself: each rank's time per call is
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
import signal
import time
from pathlib import Path

from deepbench.kernels.harness.record import read_facts

from ..running.local import LOG_FILE, LocalHarness
from .engines import launch_argv, launched_argv

KILL_GRACE_S = 3.0


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
