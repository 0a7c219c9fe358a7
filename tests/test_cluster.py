"""Collectives across hosts for real: the commands `deepbench launch-command` prints, run as printed
on a two-host Slurm cluster with ssh built from network namespaces (tests/cluster.py), and what
happens when a rank dies, a host is cut off, or a rank cannot join.

Each host is a network namespace with its own address, hostname and /etc/hosts, in which its own
name resolves to 127.0.1.1 (the trap that makes a rank advertise a loopback address), so these
runs also show that the ranks' sockets bind to the interface that reaches the master. Run for
real in CI (root, .ci/run installs Slurm, munge and sshd); elsewhere skipped with the reason."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import threading
import time
from pathlib import Path

import pytest

from deepbench.kernels.collective_kernels import COLLECTIVES_BY_OP
from deepbench.kernels.results import Status
from deepbench.kernels.results_file import read_results

from . import cluster as cluster_module
from .cluster import Cluster
from .test_all_reduce import SIZES, _assert_all_sizes_ok

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]

NODES, PER_NODE = 2, 2
RANKS = NODES * PER_NODE
FAST = "--fast --time-cap 0.02"
RUN_TIMEOUT_S = 600
# Short enough that a cut-off host is noticed within a test (a collective gives up after half).
FAULT_KERNEL_TIMEOUT_S = 40
# The fault tests: one kernel before the fault, the one it breaks, one after (the smallest sizes).
FAULT_RUN = "--limit 3"
FAULT_KERNELS = 3
SETTLE_S = 60.0  # how long ranks and job steps may take to end after a run
ALLOC = f"salloc --nodes={NODES} --ntasks-per-node={PER_NODE}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(tmp_path_factory.mktemp("cluster"), NODES)
    started = time.monotonic()
    c.start()
    print(f"cluster up in {time.monotonic() - started:.1f} s")
    yield c
    c.stop()
    left = c.leftovers()
    assert not left, f"the cluster left {left}"


def _login(c: Cluster, script: str, timeout: float = RUN_TIMEOUT_S, **env: str):
    """A shell on the login node (the first host), in the shared folder, as a user would type it."""
    return c.run(c.login, ["bash", "-c", script], cwd=c.shared, timeout=timeout, env=c.env(**env))


def _printed(c: Cluster, engine: str, out: Path, extra: str = "", kernel_timeout: float = 120) -> str:
    """The launch-command line for 2 nodes x 2 ranks (run inside the allocation for srun)."""
    return (
        f"deepbench launch-command --nodes {NODES} --gpus-per-node {PER_NODE} --engine {engine} "
        f"--out {out} {FAST} --kernel-timeout {kernel_timeout:g} {extra}"
    )


def _run_printed(
    c: Cluster,
    engine: str,
    out: Path,
    extra: str = "",
    kernel_timeout: float = 120,
    timeout: float = RUN_TIMEOUT_S,
    **env: str,
):
    """launch-command's output saved as a script and run by bash as it is (srun: in an allocation)."""
    script = out.parent / f"{out.name}.sh"
    both = f"{_printed(c, engine, out, extra, kernel_timeout)} > {script} && cat {script} && bash {script}"
    command = f"{ALLOC} bash -c {shlex.quote(both)}" if engine == "srun" else both
    started = time.monotonic()
    proc = _login(c, command, timeout, **env)
    print(f"{engine} {extra}: {time.monotonic() - started:.0f} s")
    return proc


def _write_hostfile(c: Cluster) -> None:
    (c.shared / "hosts").write_text("".join(f"{n.name}:{PER_NODE}\n" for n in c.nodes))


def _harness_processes(out: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if f"deepbench.kernels.harness {out}/plan.json" in cmd:
                found.append(f"{entry.name}: {cmd[:120]}")
    return found


def _nothing_left(c: Cluster, out: Path) -> None:
    """No rank of the run on any host, and nothing but the cluster's daemons in its hosts."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline and (_harness_processes(out) or c.strays()):
        time.sleep(0.5)
    assert not _harness_processes(out), f"ranks left running: {_harness_processes(out)}"
    assert not c.strays(), f"processes left on the hosts: {c.strays()}"


# ----- the printed commands, run as printed ------------------------------------------------------
@pytest.mark.parametrize("engine,backend", [("srun", "gloo"), ("mpirun", "gloo"), ("mpirun", "mpi"), ("srun", "mpi")])
def test_printed_commands_run_across_two_hosts(cluster: Cluster, engine: str, backend: str) -> None:
    """2 hosts x 2 ranks: every size, every rank's exact-sum check, rank 0's results with the other
    ranks' beside them, and a submission that `deepbench check` accepts."""
    out = cluster.shared / f"{engine}-{backend}"
    if engine == "mpirun":
        _write_hostfile(cluster)
    proc = _run_printed(cluster, engine, out, f"--backend {backend}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:] + _log(out)
    printed = proc.stdout
    if engine == "srun":  # asked of the nodes themselves, inside the allocation
        assert f"ok: {out} is seen by every node of this allocation (dbn1, dbn2" in printed
    else:
        assert "ok: hosts lists dbn1, dbn2" in printed
    assert "rendezvous port 29500 is free on dbn1" in printed or backend == "mpi"
    _assert_all_sizes_ok(out, RANKS, backend)
    record = json.loads((out / "run.json").read_text())
    assert record["state"] == "complete" and record["counts"] == {"ok": SIZES}
    assert record["device"]["rank_hosts"] == ["dbn1", "dbn1", "dbn2", "dbn2"]
    if backend == "gloo":  # rank 0's own name is 127.0.1.1 there: its sockets found the cluster's interface
        assert record["device"]["socket_ifname"] == "eth0"
    launcher = read_results(out / "results.jsonl")[0].library["launcher"]
    assert (
        launcher.startswith("srun --nodes=2 --ntasks=4")
        if engine == "srun"
        else "mpiexec -f hosts -n 4 -ppn 2" in launcher
    ), launcher
    bundle = cluster.root / f"bundle-{engine}-{backend}"
    sub = _login(
        cluster,
        f"deepbench submit {out} --out {bundle} --submitter CI --system-name 'two namespace hosts' "
        f"&& deepbench check {bundle}",
    )
    assert sub.returncode == 0 and sub.stdout.count("check passed") == 2, sub.stdout[-3000:] + sub.stderr
    _nothing_left(cluster, out)


def test_every_collective_runs_across_two_hosts(cluster: Cluster) -> None:
    """The collectives suite, unchanged, through launch-command's srun line with gloo: every collective
    at DeepBench's 100,000 floats over 2 hosts x 2 ranks, each rank's result exact."""
    out = cluster.shared / "collectives"
    proc = _run_printed(cluster, "srun", out, "--backend gloo --suite collectives --where floats=100000")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:] + _log(out)
    results = read_results(out / "results.jsonl")
    assert sorted(r.op for r in results) == sorted(COLLECTIVES_BY_OP)
    for r in results:
        assert r.status is Status.OK and r.info["ranks"] == RANKS, (r.id, r.reason)
        held = "1 of 4 ranks hold a defined result" if r.kernel.ROOTED else "all 4 ranks hold the exact result"
        assert r.parts[0].check.passed and r.parts[0].check.detail.startswith(held), (r.id, r.parts[0].check)
    assert json.loads((out / "run.json").read_text())["device"]["rank_hosts"] == ["dbn1", "dbn1", "dbn2", "dbn2"]
    _nothing_left(cluster, out)


def _log(out: Path) -> str:
    log = out / "harness.log"
    return log.read_text()[-4000:] if log.exists() else ""


# ----- failures across hosts ----------------------------------------------------------------------
def _lines(path: Path) -> int:
    """Lines written so far; 0 before the file exists. Rank 3's own file can be written before rank 0
    creates the run's results.jsonl, and a watcher that fails on the missing file never mends the cable."""
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0


def _when_rank_3_has_measured(out: Path, then, timeout: float = 300) -> threading.Thread:
    """Act (in a thread) once rank 3, on the second host, has finished its first kernel."""

    def watch() -> None:
        deadline = time.monotonic() + timeout
        path = out / "ranks" / "rank-3" / "results.jsonl"
        while time.monotonic() < deadline:
            if _lines(path) >= 1:
                then()
                return
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _rank_pid(out: Path, rank: int, variable: str) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"{out}/plan.json".encode() in cmd and f"{variable}={rank}".encode() in env:
            return int(entry.name)
    return None


def _assert_one_failure_then_the_rest(out: Path, proc, *named: str) -> None:
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    results = read_results(out / "results.jsonl")
    assert len(results) == FAULT_KERNELS, [(r.id, r.status) for r in results]
    bad = [r for r in results if r.status is not Status.OK]
    assert len(bad) == 1 and bad[0].status in (Status.FAILED, Status.TIMEOUT), [(r.id, r.reason) for r in bad]
    for name in named:
        assert name in bad[0].reason, bad[0].reason
    first = results[0]  # measured before the fault: kept as it was
    assert first.id == "all_reduce/train/000/fp32" and first.status is Status.OK
    assert all(r.parts[0].check.passed for r in results if r.status is Status.OK)
    assert bad[0].id in proc.stdout  # the terminal showed it


@pytest.mark.parametrize("engine,backend,variable", [("srun", "gloo", "SLURM_PROCID"), ("srun", "mpi", "SLURM_PROCID")])
def test_rank_killed_on_second_host(cluster: Cluster, engine: str, backend: str, variable: str) -> None:
    """SIGKILL of rank 3 (dbn2) mid-run: that kernel fails naming rank 3 on dbn2 (gloo's ranks
    still there say who is missing; MPI goes down whole, and srun names the task), the run goes on."""
    out = cluster.shared / f"killed-{engine}-{backend}"
    killed: list[int] = []

    def kill() -> None:
        pid = _rank_pid(out, 3, variable)
        if pid:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    if engine == "mpirun":
        _write_hostfile(cluster)
    _when_rank_3_has_measured(out, kill)
    proc = _run_printed(cluster, engine, out, f"--backend {backend} {FAULT_RUN}", kernel_timeout=FAULT_KERNEL_TIMEOUT_S)
    assert killed, "rank 3 was never seen running"
    _assert_one_failure_then_the_rest(out, proc, "rank 3 on dbn2")
    _nothing_left(cluster, out)


def test_second_host_cut_off_mid_run(cluster: Cluster) -> None:
    """The second host's cable down mid-kernel, up again once that kernel is recorded: the kernel
    fails naming both of its ranks, and the run goes on over the mended network."""
    out = cluster.shared / "cut"
    cut_at: list[float] = []
    second = cluster.nodes[1]

    def cut() -> None:
        cluster.cut(second)
        cut_at.append(time.monotonic())
        deadline = time.monotonic() + 240
        try:
            while time.monotonic() < deadline:  # until rank 0 recorded the broken kernel
                if _lines(out / "results.jsonl") >= 2:
                    break
                time.sleep(0.2)
        finally:  # a cable left cut stalls the rest of the run until Slurm revokes the job
            cluster.mend(second)

    watcher = _when_rank_3_has_measured(out, cut)
    try:
        proc = _run_printed(cluster, "srun", out, FAULT_RUN, kernel_timeout=FAULT_KERNEL_TIMEOUT_S)
    finally:
        watcher.join(5)
        cluster.mend(second)
    assert cut_at, "the cable was never cut"
    _assert_one_failure_then_the_rest(out, proc, "rank 2 on dbn2", "rank 3 on dbn2")
    _nothing_left(cluster, out)


def test_rank_that_cannot_join_stops_every_rank(cluster: Cluster) -> None:
    """The user's own GLOO_SOCKET_IFNAME=lo stands (and is wrong across hosts): the ranks that
    cannot connect say so, the others stop within seconds, and the reason reaches the terminal,
    both through deepbench-run and from the bare srun line."""
    out = cluster.shared / "nojoin"
    started = time.monotonic()
    proc = _run_printed(cluster, "srun", out, FAULT_RUN, GLOO_SOCKET_IFNAME="lo")
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "could not join" in proc.stderr and "its sockets use lo" in proc.stderr, proc.stderr[-3000:]
    assert took < 120, f"{took:.0f} s: the ranks waited instead of stopping"
    assert not read_results(out / "results.jsonl")
    _nothing_left(cluster, out)
    # the command inside --launch alone: every rank's stderr is the terminal
    # the script's lines as the shell reads them: a backslash-newline continues a command (at any width)
    script = (out.parent / "nojoin.sh").read_text().replace("\\\n", "").splitlines()
    launch = next(line for line in script if line.startswith("deepbench-run "))
    bare = shlex.split(launch)[shlex.split(launch).index("--launch") + 1]
    exports = next(line for line in script if line.startswith("export "))
    started = time.monotonic()
    proc = _login(cluster, f"{ALLOC} bash -c {shlex.quote(exports + ' && ' + bare)}", GLOO_SOCKET_IFNAME="lo")
    took = time.monotonic() - started
    assert proc.returncode != 0 and took < 60, f"{took:.0f} s, status {proc.returncode}"
    stops = [line for line in proc.stderr.splitlines() if line.startswith("deepbench: rank")]
    assert {line.split()[2] for line in stops} == {"0", "1", "2", "3"}, proc.stderr[-3000:]
    _nothing_left(cluster, out)


# ----- what the commands need, said by the tool -----------------------------------------------------
def test_launch_command_says_what_the_cluster_lacks(cluster: Cluster) -> None:
    """A folder only the login node sees (/run is each host's own here), a busy rendezvous port,
    and srun's PMIx (listed by this Slurm, but its library is not installed) are said in the output."""
    busy = cluster.root / "port-busy"
    holder = cluster.popen(
        cluster.login,
        [
            "python3",
            "-c",
            "import socket, sys, time; s = socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            "s.bind(('', 29500)); s.listen(); open(sys.argv[1], 'w').close(); "
            "time.sleep(600)",
            str(busy),
        ],
    )
    try:
        deadline = time.monotonic() + 30
        while not busy.exists() and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert busy.exists(), "could not hold the port"
        out = "/run/deepbench-not-shared"
        proc = _login(cluster, f"{ALLOC} {_printed(cluster, 'srun', Path(out))} --backend gloo")
        assert proc.returncode == 0, proc.stderr
        assert f"missing: dbn2 cannot read {out}/plan.json" in proc.stdout, proc.stdout
        proc = _login(cluster, f"{ALLOC} {_printed(cluster, 'srun', Path(out + '-2'))}")
        assert "missing: rendezvous port 29500 is in use on dbn1" in proc.stdout, proc.stdout
        proc = _login(cluster, f"{ALLOC} {_printed(cluster, 'srun', Path(out + '-3'))} --backend mpi")
        plugin = "pmix" if "srun --mpi=pmix starts" in proc.stdout else "pmi2"
        assert f"--mpi={plugin} " in proc.stdout
        if plugin == "pmi2":  # Debian's Slurm lists pmix without libpmix2 installed
            assert "since this cluster lacks pmix" in proc.stdout, proc.stdout
    finally:
        holder.kill()
        holder.wait()


# ----- nothing left behind ------------------------------------------------------------------------
def test_cluster_leaves_nothing_behind(cluster: Cluster) -> None:
    """Stopping the cluster with a job and an ssh session still running leaves no namespace, no
    process in them, no mount, and no edited file (runs last: the fixture's stop is then a no-op)."""
    hosts_before = hashlib.sha256(Path("/etc/hosts").read_bytes()).hexdigest()
    job = cluster.popen(cluster.login, ["salloc", "--nodes=2", "srun", "sleep", "600"])
    ssh = cluster.popen(cluster.login, ["ssh", cluster.nodes[1].name, "sleep", "600"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(cluster.strays()) < 4:
        time.sleep(0.2)
    assert cluster.strays(), "the job and the ssh session should be running"
    cluster.stop()
    job.wait(30)
    ssh.wait(30)
    assert not cluster.leftovers(), cluster.leftovers()
    assert not [ns for ns in cluster_module.netns_list() if ns.startswith(cluster_module.PREFIX)]
    assert hashlib.sha256(Path("/etc/hosts").read_bytes()).hexdigest() == hosts_before
