"""A small real cluster on this machine, for the multi-node tests (tests/test_cluster.py).

Hosts are network namespaces, each with its own address, joined by veth pairs to a bridge that
lives in a "switch" namespace of its own (in the root namespace Docker's iptables policy drops
forwarded bridge traffic). Each host also has its own hostname (a UTS namespace) and its own
view of a few files (a mount namespace): its /etc/hosts maps its own name to 127.0.1.1, as
Debian's installer writes it, which is the trap that makes a rank advertise a loopback address
to the other hosts; the other hosts' names map to their cluster addresses. Every host runs
munged (one key for all), slurmd and sshd (keys made here; root logs in by key); the first also
runs slurmctld and is the login node. Files are shared: the namespaces share the filesystem,
which stands for a cluster's shared filesystem (same path on every host).

Nothing outside `root` is written: Slurm reads SLURM_CONF, munge's socket path is in
slurm.conf, ssh reads the config given by a wrapper first on PATH, and /etc/hosts and
/run are replaced inside the hosts' mount namespaces only. `stop()` ends every process in the
hosts' namespaces and deletes the namespaces; `leftovers()` says what would remain.

  python -m tests.cluster up /tmp/cl     # start one by hand (prints how to enter it)
  python -m tests.cluster down /tmp/cl"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from deepbench.runner.launch.ranks.ranked_harness import process_alive

PREFIX = "deepbench-cl"  # namespace names: PREFIX-switch, PREFIX-dbn1, ...
SUBNET = "10.77.0"
PREFIX_LEN = 24
LOOPBACK_NAME_ADDR = "127.0.1.1"  # Debian's /etc/hosts line for the machine's own name
TOOLS = (
    "ip",
    "unshare",
    "nsenter",
    "munged",
    "slurmctld",
    "slurmd",
    "srun",
    "salloc",
    "scontrol",
    "sinfo",
    "sshd",
    "ssh",
    "ssh-keygen",
)
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
POLL_S = 0.2
STATE_FILE = "cluster.json"


def missing() -> str:
    """Why a cluster cannot be built here ('' when it can)."""
    if os.geteuid() != 0:
        return "building a cluster from network namespaces needs root"
    absent = [t for t in TOOLS if not (shutil.which(t) or shutil.which(t, path="/usr/sbin:/sbin"))]
    if absent:
        return (
            f"missing {', '.join(absent)} (apt-get install slurmctld slurmd slurm-client munge "
            "openssh-server iproute2 util-linux)"
        )
    return ""


def _tool(name: str) -> str:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") or name


def sh(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([_tool(argv[0]), *argv[1:]], check=check, capture_output=True, text=True, **kw)


@dataclass
class Node:
    name: str
    address: str
    netns: str
    holder: int = 0  # pid of the process that holds the node's UTS and mount namespaces

    def enter(self, cwd: Path | str | None = None) -> list[str]:
        """Prefix that runs a command on this host (its network, hostname and files), in `cwd`
        (nsenter's default is the holder's, the root)."""
        return [
            _tool("nsenter"),
            f"--target={self.holder}",
            "--net",
            "--uts",
            "--mount",
            f"--wd={cwd or os.getcwd()}",
            "--",
        ]


@dataclass
class Cluster:
    root: Path
    size: int = 2
    nodes: list[Node] = field(default_factory=list)
    switch: str = f"{PREFIX}-switch"
    daemons: list[subprocess.Popen] = field(default_factory=list)  # ours to collect when they end
    baseline: set[int] = field(default_factory=set)  # every process on the hosts once the cluster is up

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.nodes = [Node(f"dbn{i}", f"{SUBNET}.{i}", f"{PREFIX}-dbn{i}") for i in range(1, self.size + 1)]

    # ----- paths -------------------------------------------------------------------------
    @property
    def shared(self) -> Path:
        """The shared folder (same path on every host)."""
        return self.root / "shared"

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def login(self) -> Node:
        return self.nodes[0]

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a command on the cluster: our ssh first on PATH, our slurm.conf."""
        return {
            **os.environ,
            "PATH": f"{self.root / 'bin'}:{os.environ.get('PATH', '')}",
            "SLURM_CONF": str(self.conf),
            **extra,
        }

    # ----- running things on a host ----------------------------------------------------------
    def popen(self, node: Node, argv: list[str], log: Path | None = None, **kw) -> subprocess.Popen:
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - the daemon's log, open while it runs
        kw.setdefault("env", self.env())
        proc = subprocess.Popen(
            [*node.enter(kw.pop("cwd", None)), *argv],
            stdout=out,
            stderr=subprocess.STDOUT if log else out,
            stdin=subprocess.DEVNULL,
            **kw,
        )
        self.daemons.append(proc)
        return proc

    def run(self, node: Node, argv: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("env", self.env())
        return subprocess.run(
            [*node.enter(kw.pop("cwd", None)), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            **kw,
        )

    # ----- building it ---------------------------------------------------------------------
    def start(self) -> None:
        remove_stale()
        if self.root.exists():
            shutil.rmtree(self.root)
        for d in ("bin", "etc", "ssh", "munge", "slurmctld", "shared"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        try:
            self._network()
            self._hosts()
            self._munge()
            self._slurm()
            self._ssh()
            self._save()
            self.baseline = set(_pids_in(_namespace_inodes([n.netns for n in self.nodes])))
        except BaseException:
            self.stop()
            raise

    def _network(self) -> None:
        sh("ip", "netns", "add", self.switch)
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        for n in self.nodes:
            sh("ip", "netns", "add", n.netns)
            sh(
                "ip",
                "link",
                "add",
                "eth0",
                "netns",
                n.netns,
                "type",
                "veth",
                "peer",
                "name",
                self.port(n),
                "netns",
                self.switch,
            )
            sh("ip", "-n", self.switch, "link", "set", self.port(n), "master", "br0", "up")
            sh("ip", "-n", n.netns, "addr", "add", f"{n.address}/{PREFIX_LEN}", "dev", "eth0")
            sh("ip", "-n", n.netns, "link", "set", "eth0", "up")
            sh("ip", "-n", n.netns, "link", "set", "lo", "up")

    @staticmethod
    def port(node: Node) -> str:
        """The switch's end of the node's cable (set down to cut the node off)."""
        return f"port-{node.name}"

    def _hosts(self) -> None:
        for n in self.nodes:
            d = self.root / "nodes" / n.name
            (d / "munge").mkdir(parents=True)
            os.chmod(d / "munge", 0o755)
            lines = ["127.0.0.1 localhost", f"{LOOPBACK_NAME_ADDR} {n.name}"]
            lines += [f"{o.address} {o.name}" for o in self.nodes if o is not n]
            (d / "hosts").write_text("\n".join(lines) + "\n")
            # The holder: a new hostname and mount namespace inside the node's network namespace,
            # with the node's /etc/hosts, its own munge socket folder and an empty /run.
            script = (
                f"hostname {n.name} && mount --bind {d / 'hosts'} /etc/hosts && "
                f"mount --bind {d / 'munge'} {self.root / 'munge'} && "
                "mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/sshd && exec sleep infinity"
            )
            holder = subprocess.Popen(
                [
                    _tool("ip"),
                    "netns",
                    "exec",
                    n.netns,
                    _tool("unshare"),
                    "--uts",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    script,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            n.holder = holder.pid
            self.daemons.append(holder)
            _wait(
                lambda: _cmdline(holder.pid).startswith("sleep"),  # noqa: B023 - _wait calls it at once
                f"the namespaces of {n.name}",
                lambda: holder.stderr.read().decode() if holder.poll() is not None and holder.stderr else "",  # noqa: B023 - _wait calls it at once
            )

    def _munge(self) -> None:
        key = self.root / "etc" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        for n in self.nodes:
            d = self.root / "nodes" / n.name
            self.popen(
                n,
                [
                    _tool("munged"),
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={self.root / 'munge' / 'munge.socket.2'}",
                    f"--pid-file={d / 'munged.pid'}",
                    f"--log-file={d / 'munged.log'}",
                    f"--seed-file={d / 'munged.seed'}",
                ],
                log=d / "munged.out",
                start_new_session=True,
            )
        socket = self.root / "munge" / "munge.socket.2"
        for n in self.nodes:
            _wait(
                lambda: self.run(n, ["sh", "-c", f"munge -n -S {socket} | unmunge -S {socket}"]).returncode == 0,  # noqa: B023
                f"munged on {n.name}",
                lambda: (self.root / "nodes" / n.name / "munged.out").read_text(),  # noqa: B023 - _wait calls it at once
            )

    def _slurm(self) -> None:
        cpus = os.cpu_count() or 1
        r = self.root
        (r / "etc" / "slurm.conf").write_text(
            SLURM_CONF.format(
                controller=self.login.name,
                controller_addr=self.login.address,
                root=r,
                munge=r / "munge" / "munge.socket.2",
                cpus=cpus,
                nodes="\n".join(
                    f"NodeName={n.name} NodeAddr={n.address} CPUs={cpus} State=UNKNOWN" for n in self.nodes
                ),
                names=",".join(n.name for n in self.nodes),
            )
        )
        (r / "etc" / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        self.popen(
            self.login,
            [_tool("slurmctld"), "-D", "-f", str(self.conf)],
            log=r / "slurmctld.out",
            start_new_session=True,
        )
        for n in self.nodes:
            self.popen(
                n,
                [_tool("slurmd"), "-D", "-f", str(self.conf)],
                log=r / "nodes" / n.name / "slurmd.out",
                start_new_session=True,
            )

        def idle() -> bool:
            p = self.run(self.login, ["sinfo", "-h", "-N", "-o", "%N %t"])
            states = dict(line.split() for line in p.stdout.splitlines() if line.strip())
            return p.returncode == 0 and all(states.get(n.name) == "idle" for n in self.nodes)

        _wait(
            idle,
            "slurmd on every node to be idle",
            lambda: (
                self.run(self.login, ["sinfo", "-N"]).stdout + (r / "slurmctld.log").read_text()[-2000:]
                if (r / "slurmctld.log").exists()
                else ""
            ),
        )

    def _ssh(self) -> None:
        d = self.root / "ssh"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "deepbench-cluster-test", "-f", str(d / "id_ed25519"))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "deepbench-cluster-host", "-f", str(d / "host_key"))
        shutil.copy(d / "id_ed25519.pub", d / "authorized_keys")
        host_pub = (d / "host_key.pub").read_text().split()[:2]
        (d / "known_hosts").write_text("".join(f"{n.name},{n.address} {' '.join(host_pub)}\n" for n in self.nodes))
        (d / "config").write_text(SSH_CONFIG.format(d=d))
        wrapper = self.root / "bin" / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec {_tool("ssh")} -F {d / "config"} "$@"\n')
        wrapper.chmod(0o755)
        for n in self.nodes:
            cfg = self.root / "nodes" / n.name / "sshd_config"
            cfg.write_text(SSHD_CONFIG.format(d=d, address=n.address, pid=cfg.parent / "sshd.pid"))
            self.popen(
                n, [_tool("sshd"), "-D", "-e", "-f", str(cfg)], log=cfg.parent / "sshd.log", start_new_session=True
            )
        for n in self.nodes:
            other = self.nodes[-1] if n is self.login else self.login
            _wait(
                lambda: self.run(other, ["ssh", n.name, "hostname"]).stdout.strip() == n.name,  # noqa: B023
                f"ssh from {other.name} to {n.name}",
                lambda: self.run(other, ["ssh", n.name, "hostname"]).stderr,  # noqa: B023 - _wait calls it at once
            )

    def _save(self) -> None:
        state = {"nodes": [n.__dict__ for n in self.nodes], "size": self.size}
        (self.root / STATE_FILE).write_text(json.dumps(state))

    # ----- network faults -------------------------------------------------------------------
    def cut(self, node: Node) -> None:
        sh("ip", "-n", self.switch, "link", "set", self.port(node), "down")

    def mend(self, node: Node) -> None:
        sh("ip", "-n", self.switch, "link", "set", self.port(node), "up")

    # ----- tearing it down ---------------------------------------------------------------------
    def stop(self) -> None:
        """End every process in the cluster's namespaces, then delete the namespaces."""
        namespaces = [self.switch, *(n.netns for n in self.nodes)]
        _end_processes(_namespace_inodes(namespaces), self.daemons)
        for ns in namespaces:
            if ns in netns_list():
                sh("ip", "netns", "del", ns, check=False)

    def strays(self) -> list[str]:
        """Processes on the hosts other than the cluster's own daemons (job steps, ranks, ssh
        sessions): none once every job has ended."""
        return [
            f"{pid} {_cmdline(pid)[:100]}"
            for pid in _pids_in(_namespace_inodes([n.netns for n in self.nodes]))
            if pid not in self.baseline
        ]

    def leftovers(self) -> list[str]:
        """What is left of the cluster: namespaces, processes in them, mounts under root."""
        left = [f"network namespace {ns}" for ns in netns_list() if ns.startswith(PREFIX)]
        left += [
            f"process {pid} ({_cmdline(pid)[:80]})"
            for pid in _pids_in(_namespace_inodes([self.switch, *(n.netns for n in self.nodes)]))
        ]
        left += [f"process {n.holder} (holder of {n.name})" for n in self.nodes if n.holder and process_alive(n.holder)]
        with open("/proc/self/mountinfo") as f:
            left += [
                f"mount {line.split()[4]}"
                for line in f
                if str(self.root) in line.split()[4] or f"/run/netns/{PREFIX}" in line.split()[4]
            ]
        return left


def remove_stale() -> None:
    """Namespaces (and their processes) left by an earlier cluster that did not stop."""
    stale = [ns for ns in netns_list() if ns.startswith(PREFIX)]
    if stale:
        _end_processes(_namespace_inodes(stale))
        for ns in stale:
            sh("ip", "netns", "del", ns, check=False)


def netns_list() -> list[str]:
    p = sh("ip", "netns", "list", check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _namespace_inodes(names: list[str]) -> set[int]:
    out = set()
    for name in names:
        with contextlib.suppress(OSError):
            out.add(os.stat(f"/run/netns/{name}").st_ino)
    return out


def _pids_in(inodes: set[int]) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino in inodes and process_alive(int(entry)):
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def _end_processes(inodes: set[int], ours: list[subprocess.Popen] = ()) -> None:
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
        for pid in _pids_in(inodes):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while _pids_in(inodes) and time.monotonic() < deadline:
            for proc in ours:  # collect the daemons this process started, so none stays a zombie
                proc.poll()
            time.sleep(POLL_S)
    for proc in ours:
        proc.poll()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _wait(ready, what: str, why=lambda: "") -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(POLL_S)
    raise RuntimeError(f"waited {START_TIMEOUT_S:g} s for {what}: {why()[-3000:]}")


SLURM_CONF = """\
# A test cluster of network namespaces (tests/cluster.py).
ClusterName=deepbench
SlurmctldHost={controller}({controller_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge}
CredType=cred/munge
StateSaveLocation={root}/slurmctld
SlurmdSpoolDir={root}/nodes/%n/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/nodes/%n/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/nodes/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=5
InactiveLimit=0
{nodes}
PartitionName=cluster Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""

SSH_CONFIG = """\
Host *
  IdentityFile {d}/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile {d}/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
"""

SSHD_CONFIG = """\
ListenAddress {address}
HostKey {d}/host_key
AuthorizedKeysFile {d}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile {pid}
"""


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("up", "down"):
        print("usage: python -m tests.cluster up|down ROOT", file=sys.stderr)
        return 2
    root = Path(argv[1])
    if argv[0] == "up":
        why = missing()
        if why:
            print(why, file=sys.stderr)
            return 1
        cluster = Cluster(root)
        cluster.start()
        print(
            f"up: {', '.join(f'{n.name} {n.address}' for n in cluster.nodes)}; a shell on the login node:\n"
            f"  SLURM_CONF={cluster.conf} PATH={cluster.root / 'bin'}:$PATH {' '.join(cluster.login.enter())} bash"
        )
        return 0
    state = json.loads((root / STATE_FILE).read_text()) if (root / STATE_FILE).exists() else {"size": 2, "nodes": []}
    cluster = Cluster(root, state["size"])
    for n, saved in zip(cluster.nodes, state["nodes"], strict=False):
        n.holder = saved["holder"]
    cluster.stop()
    left = cluster.leftovers()
    print("down" + (": left " + "; ".join(left) if left else ""))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
