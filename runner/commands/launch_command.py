"""Print the commands that run all-reduce across nodes on the engines a cluster already has.

  deepbench launch-command --nodes 2 --gpus-per-node 8 --platform nvidia --out /shared/ar
  deepbench launch-command --nodes 4 --gpus-per-node 4 --platform amd --engine srun --image ghcr.io/x/deepbench-amd

Writes the plan (the same one `deepbench-run --ranks N` would write) into --out, which every node
must see at the same path (a shared filesystem), and prints the mpirun (host file) and Slurm srun
commands that start one harness rank per GPU on every node, on the node itself or in its container
(docker, or enroot/pyxis with srun's --container-image). Each is handed to `deepbench-run --resume
OUT --launch '...'`, which starts it and gives the run what a local one has: progress, the
per-kernel timeout, a restart after a rank dies, the tables. Each rank reads its number from the
engine (kernels/launch_rank.py); rank 0 writes OUT/results.jsonl and OUT/run.json with the mean and max
over all ranks, the others OUT/ranks/rank-K/. What the commands need from the cluster (a shared
folder, a free rendezvous port, srun's PMIx, a host file) is checked where it can be and said in
the output (cluster_needs.py). Nothing is started here but those checks: clusters start jobs their
own way."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, replace

from ...kernels.backends import declaration_of
from ...kernels.catalog import operations, traits_of
from ...kernels.results import Plan
from ..errors import UserError
from ..launch.ranks.cluster_needs import (
    Need,
    allocation_nodes,
    first_node,
    hostfile_need,
    rendezvous_port,
    shared_folder,
    srun_pmi_plugin,
)
from ..launch.ranks.engines import IMAGE_PYTHON, find_mpiexec, launcher_of, mpiexec_flavour
from ..launch.running import request as run_request
from ..launch.running.new_plan import write_plan
from ..platforms import Platform
from ..render.display import make_console
from ..render.shell_lines import COMMENT, command, comment, one_word, quoted

NAME = "launch-command"
HELP = "print the mpirun / srun commands for all-reduce across nodes"
HARNESS = "-m deepbench.kernels.harness"
DEFAULT_PORT = 29500
# What every rank needs besides the rendezvous and its backend's variables (its declaration's
# rank_environment): one CPU thread per rank unless the user says otherwise, as on one node. Open MPI
# must be told to pass these on (MPICH's Hydra passes the whole environment).
RANK_PASS = ("OMP_NUM_THREADS", "PATH", "PYTHONUNBUFFERED", "DEEPBENCH_LAUNCHER")
THREADS = "OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    run_request.add_arguments(parser)  # deepbench-run's own options: the plan is the one it would make
    g = parser.add_argument_group("cluster")
    g.add_argument("--nodes", type=int, required=True, metavar="N", help="nodes")
    g.add_argument(
        "--gpus-per-node",
        type=int,
        required=True,
        metavar="G",
        help="ranks per node: one per GPU (CPU-only: processes per node)",
    )
    g.add_argument("--engine", choices=("mpirun", "srun", "all"), default="all", help="which commands to print")
    g.add_argument("--hostfile", default="hosts", metavar="FILE", help="mpirun's host file (default: hosts)")
    g.add_argument("--master-port", type=int, default=DEFAULT_PORT, help="the ranks' rendezvous port (MASTER_PORT)")
    collectives = ",".join(op for op in operations() if traits_of(op).collective)  # what runs across ranks
    parser.set_defaults(ops=collectives, suite="train", local=True)


@dataclass(frozen=True)
class Cluster:
    """The cluster the commands are for: its nodes and ranks per node, which engines' commands, the
    mpirun host file, and the port torchrun's ranks meet on."""

    nodes: int
    gpus_per_node: int
    engine: str
    hostfile: str
    master_port: int

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise UserError("--nodes and --gpus-per-node must be at least 1")

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node


def run(args: argparse.Namespace) -> int:
    cluster = Cluster(args.nodes, args.gpus_per_node, args.engine, args.hostfile, args.master_port)
    request = replace(run_request.RunRequest.from_args(args), ranks=cluster.ranks)  # checked again with the ranks
    if request.results.out is None:
        raise UserError("say where the plan and results go: --out DIR, on a filesystem every node shares")
    plan, outdir = write_plan(request)
    out = str(outdir.resolve())
    width = make_console().width  # the terminal's; piped: COLUMNS, else one line per command
    layout = Layout(cluster, request.run_platform, out, plan, request.container.image, width)
    lines = [
        comment(
            f"plan: {out}/plan.json  ({len(plan.items)} collective kernels, backend {plan.backend}, "
            f"{cluster.ranks} ranks = {cluster.nodes} nodes x {cluster.gpus_per_node})",
            width,
        ),
        comment("what the commands need, checked from here:", width),
    ]
    needs = [shared_folder(outdir.resolve(), cluster.nodes)]
    if not layout.by_engine:  # ranks an engine's own processes meet through it, not at MASTER_ADDR:MASTER_PORT
        needs.append(rendezvous_port(cluster.master_port, first_node(allocation_nodes(), cluster.hostfile)))
    lines += [layout.need(n) for n in needs]
    if cluster.engine in ("mpirun", "all"):
        lines += layout.mpirun()
    if cluster.engine in ("srun", "all"):
        lines += layout.srun()
    lines.append(
        comment(
            f"afterwards: rank 0 has written {out}/results.jsonl and {out}/run.json, the other ranks {out}/ranks/",
            width,
        )
    )
    print("\n".join(lines))
    return 0


ALONE = (
    "(the command inside --launch alone starts the same ranks, without deepbench-run's progress, per-kernel "
    "timeout and restarts)"
)


class Layout:
    """The command lines for one plan: N nodes x G ranks, on the nodes or in containers, each fitted to
    `width` (runner/render/shell_lines.py)."""

    def __init__(
        self, cluster: Cluster, platform: Platform, out: str, plan: Plan, image: str | None, width: int
    ) -> None:
        self.cluster, self.platform, self.out, self.backend = cluster, platform, out, plan.backend
        self.width = width
        launcher, declared = launcher_of(plan.backend), declaration_of(plan.backend)
        # an engine that is a program of its own (mpirun): the ranks are its processes and meet through it
        self.by_engine = not launcher.module
        self.rendezvous = launcher.rendezvous_env  # the variables torchrun's ranks meet through
        self.rank_env = dict(declared.rank_environment)  # the backend's own, with the default a site's unset gets
        self.passed = (*self.rendezvous, *self.rank_env, *RANK_PASS)
        self.install_hint = declared.install_hint
        self.n, self.g = cluster.ranks, cluster.gpus_per_node
        self.image = image or platform.image
        # on the nodes: this Python (the one with deepbench here; a shared install puts it at the same
        # path on every node); in a container: the image's
        where = [HARNESS, *quoted([out + "/plan.json", out])]  # units a line may break between
        self.harness = [shlex.quote(sys.executable), *where]
        self.in_image = [IMAGE_PYTHON, *where]

    def need(self, need: Need) -> str:
        return comment(f"{need.status}: {need.text}", self.width, indent=3)

    def supervised(self, ranks_command: list[str], prefix: str = "") -> str:
        """deepbench-run starting the ranks (progress, per-kernel timeout, restarts, tables)."""
        words = ["deepbench-run", f"--resume {shlex.quote(self.out)}", "--launch", *one_word(ranks_command)]
        return command(words, self.width, prefix)

    def exports(self, master: str) -> str:
        if not self.rendezvous:
            return command(["export", THREADS], self.width)
        own = [f"{name}=${{{name}:-{value}}}" for name, value in self.rank_env.items()]
        words = ["export", f"MASTER_ADDR={master}", f"MASTER_PORT={self.cluster.master_port}", *own, THREADS]
        return command(words, self.width)

    def mpirun(self) -> list[str]:
        hostfile = self.cluster.hostfile
        first = "$(head -n1 " + shlex.quote(hostfile) + " | cut -d' ' -f1 | cut -d: -f1)"
        needs = [hostfile_need(hostfile, self.cluster.nodes)]
        try:
            mpiexec = find_mpiexec(self.install_hint)
            flavour, version = mpiexec_flavour(mpiexec)
            mine = f" (the MPI the {self.backend} backend loads here)" if self.by_engine else ""
            needs.append(Need("ok", f"{mpiexec}: {flavour} {version}".strip() + mine))
        except UserError as exc:
            mpiexec, flavour = "mpirun", "unknown"
            needs.append(Need("missing", str(exc)))
        # the one on PATH by its name, any other by its path (an MPI backend needs the MPI its binding loads)
        name = os.path.basename(mpiexec)
        shown = name if _same_file(mpiexec, name) else mpiexec
        hydra = [shown, f"-f {shlex.quote(hostfile)}", f"-n {self.n}", f"-ppn {self.g}", *self.harness]
        openmpi = [
            shown if flavour == "openmpi" else "mpirun",
            *self._hostfile_placement(),
            *(f"-x {v}" for v in self.passed),
            *self.harness,
        ]
        main, other, other_name = (
            (openmpi, hydra, "MPICH (Hydra)") if flavour == "openmpi" else (hydra, openmpi, "Open MPI")
        )
        lines = [
            comment(
                "--- mpirun over ssh, with a host file (one line per node; MPICH: 'node:G', Open MPI: "
                "'node slots=G') ---",
                self.width,
            ),
            *(self.need(n) for n in needs),
            self.exports(first),
            self.supervised(main),
            comment(f"with {other_name} instead:", self.width),
            self.supervised(other, COMMENT + " "),
        ]
        if self.by_engine:
            lines.append(
                comment(
                    f"the {self.backend} backend in containers needs the MPI's process manager in the container "
                    "(PMIx): use srun --mpi=pmix with pyxis",
                    self.width,
                )
            )
        else:
            rank_vars = ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"]
            rendezvous = (*self.rendezvous, *self.rank_env)
            docker = _docker(self.platform, self.image, self.out, [*rendezvous, "OMP_NUM_THREADS", *rank_vars])
            per_rank = [
                "mpirun",
                *self._hostfile_placement(),
                *(f"-x {v}" for v in rendezvous),
                *docker,
                *self.in_image,
            ]
            lines += [
                comment("Open MPI, one container per rank:", self.width),
                self.supervised(per_rank, COMMENT + " "),
            ]
        return [*lines, comment(ALONE, self.width)]

    def _hostfile_placement(self) -> list[str]:
        """Open MPI's mpirun placement: the host file, the rank count and G ranks per node."""
        return [f"--hostfile {shlex.quote(self.cluster.hostfile)}", f"-np {self.n}", f"--map-by ppr:{self.g}:node"]

    def srun(self) -> list[str]:
        needs: list[Need] = []
        pmi = []
        if self.by_engine:
            plugin, need = srun_pmi_plugin()
            needs.append(need)
            pmi = [f"--mpi={plugin}"]
        gpus = [f"--gpus-per-node={self.g}"] if self.platform.gpus or self.platform.devices else []
        base = ["srun", f"--nodes={self.cluster.nodes}", f"--ntasks={self.n}", f"--ntasks-per-node={self.g}", *gpus]
        base += pmi
        pyxis = [*base, f"--container-image={self.image}", f"--container-mounts={self.out}:{self.out}", *self.in_image]
        return [
            comment(
                f"--- Slurm, in an allocation (salloc --nodes={self.cluster.nodes} --ntasks-per-node={self.g}, "
                "or an sbatch script) ---",
                self.width,
            ),
            *(self.need(n) for n in needs),
            self.exports('$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'),
            self.supervised([*base, *self.harness]),
            comment("in the image, through enroot/pyxis (ranks read SLURM_PROCID / SLURM_LOCALID):", self.width),
            self.supervised(pyxis, COMMENT + " "),
            comment(ALONE, self.width),
        ]


def _same_file(path: str, name: str) -> bool:
    found = shutil.which(name)
    if not found:
        return False
    return os.path.realpath(found) == os.path.realpath(path)


def _docker(platform: Platform, image: str, out: str, env: list[str]) -> list[str]:
    """docker run's words for one rank's container, an option and its value one unit."""
    return [
        "docker run --rm",
        "--network host",
        "--ipc host",
        *(["--gpus all"] if platform.gpus else [f"--device {d}" for d in platform.devices]),
        *(f"--group-add {g}" for g in platform.group_add),
        f"-v {out}:{out}",
        *(f"-e {v}" for v in env),
        image,
    ]
