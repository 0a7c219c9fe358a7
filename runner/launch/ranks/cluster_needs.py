"""What the commands `deepbench launch-command` prints need from a cluster, checked from where it runs.

The commands assume a folder every node sees at the same path (the plan goes in, every rank's
results come out), a free TCP port on the first node for the ranks' rendezvous (torch.distributed
backends), for srun with the MPI backend a process-management interface Slurm and the MPI share
(PMIx, else PMI-2), and for mpirun an MPI launcher and a host file. A cluster that lacks one of
them fails in ways that name none of them (a rank that cannot read the plan, a rendezvous that
times out), so each is checked here where it can be, and said plainly where it cannot."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Filesystems that several machines mount at once.
NETWORK_FS = {
    "nfs",
    "nfs4",
    "lustre",
    "gpfs",
    "beegfs",
    "ceph",
    "cephfs",
    "cifs",
    "smb3",
    "glusterfs",
    "9p",
    "virtiofs",
    "panfs",
    "wekafs",
    "orangefs",
    "afs",
    "ocfs2",
    "gfs2",
    "pvfs2",
    "fuse.sshfs",
    "fuse.glusterfs",
    "fuse.juicefs",
    "fuse.weka",
    "fuse.s3fs",
    "fuse.gcsfuse",
}
PROBE_TIMEOUT_S = 60.0
# The MPI plugins of srun that MPICH and Open MPI ranks can use, best first.
SRUN_MPI = ("pmix", "pmi2")


@dataclass(frozen=True)
class Need:
    status: str  # "ok", "missing" or "unchecked"
    text: str

    def line(self) -> str:
        return f"#   {self.status}: {self.text}"


def _run(argv: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


def allocation_nodes() -> list[str]:
    """The nodes of the Slurm allocation this runs in ([] outside one)."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist or not shutil.which("scontrol"):
        return []
    done = _run(["scontrol", "show", "hostnames", nodelist])
    return done.stdout.split() if done and done.returncode == 0 else []


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding `path` (the longest mount point above it)."""
    best, kind = "", "unknown"
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                point = fields[1].replace("\\040", " ")
                if (str(path) == point or str(path).startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


def shared_folder(out: Path, nodes: int) -> Need:
    """Whether every node sees `out`: asked of the nodes themselves inside an allocation, else
    judged from the filesystem's type."""
    plan = out / "plan.json"
    names = allocation_nodes()
    if len(names) >= nodes and shutil.which("srun"):
        script = 'if test -r "$0"; then echo "seen $(hostname)"; else echo "unseen $(hostname)"; fi'
        done = _run(
            ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "sh", "-c", script, str(plan)]
        )
        if done is None or done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["no answer"])[-1] if done else "srun did not answer"
            return Need("unchecked", f"could not ask the nodes whether they see {out} (srun: {why})")
        unseen = sorted(line.split()[1] for line in done.stdout.splitlines() if line.startswith("unseen "))
        seen = sorted(line.split()[1] for line in done.stdout.splitlines() if line.startswith("seen "))
        if unseen:
            return Need(
                "missing",
                f"{', '.join(unseen)} cannot read {plan}: --out must be on a filesystem every "
                "node shares, at the same path",
            )
        return Need("ok", f"{out} is seen by every node of this allocation ({', '.join(seen)}, asked with srun)")
    kind = filesystem_type(out)
    if kind in NETWORK_FS or kind.startswith("fuse."):
        return Need("ok", f"{out} is on {kind}, a shared filesystem (every node must mount it at this path)")
    return Need(
        "unchecked",
        f"{out} is on {kind}, which is local to this machine unless the nodes share it: "
        f"every node must see it at this path (run this inside an allocation to have the "
        "nodes asked)",
    )


def first_node(names: list[str], hostfile: str) -> str | None:
    """The node the ranks' rendezvous runs on: the allocation's first, else the host file's."""
    if names:
        return names[0]
    try:
        for line in Path(hostfile).read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                return line.split()[0].split(":")[0]
    except OSError:
        pass
    return None


def port_free(port: int) -> bool:
    """Whether a TCP server could listen on `port` here (as torch's store does: every address,
    SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def rendezvous_port(port: int, master: str | None) -> Need:
    here = socket.gethostname()
    where = "this host" if master is None else master
    if master not in (None, here, socket.getfqdn()):
        return Need(
            "unchecked",
            f"port {port} must be free on {master}, where rank 0 hosts the rendezvous "
            f"(checked only where launch-command runs: {here})",
        )
    if port_free(port):
        return Need("ok", f"rendezvous port {port} is free on {where}")
    return Need(
        "missing",
        f"rendezvous port {port} is in use on {where}: another job's? choose a free one with "
        f"--master-port (e.g. {free_port()}, free here now)",
    )


def srun_pmi_plugin() -> tuple[str, Need]:
    """The `srun --mpi=` plugin for MPI ranks: PMIx where Slurm can load it, else PMI-2. Listed
    is not enough (`srun --mpi=list` names pmix where the PMIx library is missing), so each is
    tried on a job that is checked but never submitted (--test-only)."""
    if not shutil.which("srun"):
        return SRUN_MPI[0], Need(
            "unchecked",
            "srun is not here: the MPI backend under srun needs Slurm's PMIx "
            "plugin working on the cluster, else PMI-2 (--mpi=pmi2)",
        )
    failures: list[str] = []
    for name in SRUN_MPI:
        done = _run(["srun", f"--mpi={name}", "--test-only", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "true"])
        if done is not None and done.returncode == 0:
            instead = f", since this cluster lacks {SRUN_MPI[0]} ({'; '.join(failures)})" if failures else ""
            return name, Need("ok", f"srun --mpi={name} starts the MPI ranks{instead}")
        why = [line for line in (done.stderr if done else "").splitlines() if "error" in line] or ["no answer"]
        failures.append(
            f"srun --mpi={name}: " + " / ".join(line.removeprefix("srun: error: ").strip() for line in why[:2])
        )
    return SRUN_MPI[0], Need(
        "missing", f"{'; '.join(failures)}: the MPI backend cannot start under srun here; use mpirun with a host file"
    )


def hostfile_need(path: str, nodes: int) -> Need:
    try:
        hosts = [
            line.split()[0]
            for line in Path(path).read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
    except OSError:
        return Need(
            "missing",
            f"host file {path} is not here: write one line per node (MPICH: 'node:G', Open MPI: 'node slots=G')",
        )
    if len(hosts) < nodes:
        return Need("missing", f"{path} lists {len(hosts)} host(s), the plan needs {nodes}")
    return Need(
        "ok",
        f"{path} lists {', '.join(h.split(':')[0] for h in hosts[:nodes])}"
        + (f" (and {len(hosts) - nodes} more, unused)" if len(hosts) > nodes else ""),
    )
