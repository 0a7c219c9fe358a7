"""Print the commands that run all-reduce across nodes on the engines a cluster already has.

  deepbench launch-command --nodes 2 --gpus-per-node 8 --platform nvidia --out /shared/ar
  deepbench launch-command --nodes 4 --gpus-per-node 4 --platform amd --engine srun --image ghcr.io/x/deepbench-amd

Writes the plan (the same one `deepbench-run --ranks N` would write) into --out, which every node
must see at the same path (a shared filesystem), and prints the mpirun (hostfile) and Slurm srun
commands that start one harness rank per GPU on every node, in the node's container (docker,
or enroot/pyxis with srun's --container-image) or on the node itself. Each rank reads its number
from the engine (harness/ranks.py); rank 0 writes OUT/results.jsonl and OUT/run.json with the
mean and max over all ranks, the others OUT/ranks/rank-K/. Nothing is started here: clusters
start jobs their own way."""

from __future__ import annotations

import argparse
import shlex

from ..errors import UserError
from ..platforms import get_platform

NAME = "launch-command"
HELP = "print the mpirun / srun commands for all-reduce across nodes"
HARNESS = "python3 -m deepbench.kernels.harness"
DEFAULT_PORT = 29500
# Variables every rank needs; NVLink multicast stays off where the site asks for it (NCCL_NVLS_ENABLE).
RANK_ENV = ("MASTER_ADDR", "MASTER_PORT", "NCCL_NVLS_ENABLE", "NCCL_DEBUG")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .. import run

    run.add_arguments(parser)
    g = parser.add_argument_group("cluster")
    g.add_argument("--nodes", type=int, required=True, metavar="N", help="nodes")
    g.add_argument("--gpus-per-node", type=int, required=True, metavar="G",
                   help="ranks per node: one per GPU (CPU-only: processes per node)")
    g.add_argument("--engine", choices=("mpirun", "srun", "all"), default="all", help="which commands to print")
    g.add_argument("--hostfile", default="hosts", metavar="FILE", help="mpirun's host file (default: hosts)")
    g.add_argument("--master-port", type=int, default=DEFAULT_PORT, help="torch.distributed rendezvous port")
    parser.set_defaults(ops="all_reduce", suite="train", local=True)


def run(args: argparse.Namespace) -> int:
    from .. import run as run_module

    if args.nodes < 1 or args.gpus_per_node < 1:
        raise UserError("--nodes and --gpus-per-node must be at least 1")
    if args.out is None:
        raise UserError("say where the plan and results go: --out DIR, on a filesystem every node shares")
    platform = get_platform(args.platform or "cpu")
    args.ranks = args.nodes * args.gpus_per_node
    plan, outdir = run_module._new_plan(args, platform)
    out = str(outdir.resolve())
    image = args.image or platform.image
    harness = f"{HARNESS} {shlex.quote(out + '/plan.json')} {shlex.quote(out)}"
    mpi = plan.backend == "mpi"
    print(f"# plan: {out}/plan.json  ({len(plan.items)} all-reduce kernels, backend {plan.backend}, "
          f"{args.ranks} ranks = {args.nodes} nodes x {args.gpus_per_node})")
    if args.engine in ("mpirun", "all"):
        print(mpirun_text(args, platform, image, harness, out, mpi))
    if args.engine in ("srun", "all"):
        print(srun_text(args, platform, image, harness, out, mpi))
    print(f"# afterwards: rank 0 has written {out}/results.jsonl and {out}/run.json")
    return 0


def _docker(platform, image: str, out: str, env: list[str]) -> str:  # Platform
    devices = "--gpus all" if platform.gpus else " ".join(f"--device {d}" for d in platform.devices)
    groups = " ".join(f"--group-add {g}" for g in platform.group_add)
    passing = " ".join(f"-e {v}" for v in env)
    return (f"docker run --rm --network host --ipc host {devices} {groups} -v {out}:{out} {passing} "
            f"{image}").replace("  ", " ")


def mpirun_text(args: argparse.Namespace, platform, image: str, harness: str, out: str, mpi: bool) -> str:
    n, g = args.ranks, args.gpus_per_node
    first = "$(head -n1 " + shlex.quote(args.hostfile) + " | cut -d' ' -f1 | cut -d: -f1)"
    rank_vars = ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"]
    lines = [
        "# --- mpirun with a host file (one line per node; Open MPI: 'node slots=G', MPICH: 'node:G') ---",
        f"export MASTER_ADDR={first} MASTER_PORT={args.master_port} NCCL_NVLS_ENABLE=${{NCCL_NVLS_ENABLE:-0}}",
        "# Open MPI, on the nodes themselves (deepbench installed on each):",
        f"mpirun --hostfile {args.hostfile} -np {n} --map-by ppr:{g}:node "
        + " ".join(f"-x {v}" for v in RANK_ENV[:3]) + f" {harness}",
        "# MPICH (Hydra), on the nodes themselves:",
        f"mpiexec -f {args.hostfile} -n {n} -ppn {g} -genvlist {','.join(RANK_ENV[:3])} {harness}",
    ]
    if mpi:
        lines.append("# the mpi backend inside containers needs the MPI's process manager in the container "
                     "(PMIx): use srun --mpi=pmix with pyxis below")
    else:
        lines += ["# Open MPI, one container per rank (the rank's number passes into the container):",
                  f"mpirun --hostfile {args.hostfile} -np {n} --map-by ppr:{g}:node "
                  + " ".join(f"-x {v}" for v in RANK_ENV[:3]) + " "
                  + _docker(platform, image, out, [*RANK_ENV[:3], *rank_vars]) + f" {harness}"]
    return "\n".join(lines)


def srun_text(args: argparse.Namespace, platform, image: str, harness: str, out: str, mpi: bool) -> str:
    n, g = args.ranks, args.gpus_per_node
    pmi = " --mpi=pmix" if mpi else ""
    gpus = f" --gpus-per-node={g}" if platform.gpus or platform.devices else ""
    base = f"srun --nodes={args.nodes} --ntasks={n} --ntasks-per-node={g}{gpus}{pmi}"
    return "\n".join([
        "# --- Slurm (in an allocation: salloc/sbatch --nodes ... ) ---",
        "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1) "
        f"MASTER_PORT={args.master_port} NCCL_NVLS_ENABLE=${{NCCL_NVLS_ENABLE:-0}}",
        "# on the nodes themselves:",
        f"{base} {harness}",
        "# in the image, through enroot/pyxis (ranks read SLURM_PROCID / SLURM_LOCALID):",
        f"{base} --container-image={image} --container-mounts={out}:{out} {harness}",
    ])
