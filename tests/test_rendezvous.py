"""The parts of running across nodes that need no cluster: which interface a rank's sockets take,
the engine command `deepbench-run --launch` accepts, the plan's rank count held against the
engine's, and what launch-command checks (a fake srun stands for a Slurm without PMIx). The
real runs across hosts are tests/test_cluster.py."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

import pytest

from deepbench.kernels.backends.collectives import rendezvous
from deepbench.kernels.backends.collectives.common import check_world
from deepbench.kernels.backends.collectives.rendezvous import RankPlace, choose_interface, interface_of
from deepbench.kernels.results import Settings
from deepbench.runner.errors import UserError
from deepbench.runner.launch.ranks import cluster_needs
from deepbench.runner.launch.ranks.engines import launched_argv
from deepbench.runner.launch.ranks.ranked_harness import engine_casualty

from .conftest import run_cli


def test_loopback_is_found_by_address() -> None:
    assert interface_of("127.0.0.1") == "lo"
    assert rendezvous.source_address("127.0.0.1") == "127.0.0.1"
    assert interface_of("192.0.2.1") is None  # TEST-NET-1: held by no interface here


def test_interface_follows_the_route_to_the_master(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank whose route to the master leaves from a cluster address binds there; the master's own
    ranks, whose name resolves to 127.0.1.1 at home, take the interface that reaches the other
    hosts; ranks that all share one host stay on the loopback."""
    held = {"10.1.0.1": "eth1", "10.1.0.2": "eth1", "127.0.1.1": "lo", "127.0.0.1": "lo"}
    monkeypatch.setattr(rendezvous, "interface_of", held.get)
    monkeypatch.setattr(rendezvous, "source_address", lambda address, port=9: {"10.1.0.2": "10.1.0.1"}[address])
    master = RankPlace(0, "a", "127.0.1.1")
    remote = RankPlace(2, "b", "10.1.0.2")
    assert choose_interface(remote, [master, remote]) == "eth1"
    assert choose_interface(master, [master, RankPlace(1, "a", "127.0.1.1"), remote]) == "eth1"
    assert choose_interface(master, [master, RankPlace(1, "a", "127.0.1.1")]) == "lo"


def test_launch_command_must_run_this_plan(tmp_path: Path) -> None:
    plan, out = tmp_path / "plan.json", tmp_path
    argv, env = launched_argv(f"srun --nodes=2 --ntasks=4 python3 -m deepbench.kernels.harness {plan} {out}", plan, out)
    assert argv[:3] == ["srun", "--nodes=2", "--ntasks=4"] and env["DEEPBENCH_LAUNCHER"] == "srun --nodes=2 --ntasks=4"
    with pytest.raises(UserError, match="must start the harness"):
        launched_argv("srun hostname", plan, out)
    with pytest.raises(UserError, match="not on this run"):
        launched_argv(f"srun python3 -m deepbench.kernels.harness /elsewhere/plan.json {out}", plan, out)
    with pytest.raises(UserError, match="--launch"):
        launched_argv("srun 'unclosed", plan, out)


def test_launch_needs_the_plan_folder(tmp_path: Path) -> None:
    proc = run_cli("deepbench-run", "--local", "--ops", "all_reduce", "--launch", "srun x", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--resume" in proc.stderr and "Traceback" not in proc.stderr


def test_ranks_the_engine_put_together_must_be_the_plans() -> None:
    """An MPI that does not speak srun's PMI starts every rank as a world of one: each would write
    the run's results as rank 0, so the backend refuses."""
    settings = Settings(ranks=4)
    check_world(4, settings, "srun")
    with pytest.raises(RuntimeError, match="asks for 4 ranks, and the MPI put 1"):
        check_world(1, settings, "the MPI")
    check_world(1, Settings(), "none")  # one rank, no engine


def _fake_srun(bin_dir: Path, pmix_loads: bool) -> None:
    """A Slurm whose pmix plugin is listed but cannot load (Debian's without libpmix2)."""
    bin_dir.mkdir()
    script = bin_dir / "srun"
    fails = "echo 'srun: error: mpi/pmix_v4: init: can not load PMIx library' >&2; exit 1"
    script.write_text(
        f'#!/bin/sh\ncase "$1" in\n  --mpi=pmix) {"exit 0" if pmix_loads else fails};;\n'
        "  --mpi=pmi2) exit 0;;\nesac\nexit 1\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("pmix_loads", [True, False])
def test_srun_mpi_plugin_is_tried_not_read_from_the_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pmix_loads: bool
) -> None:
    _fake_srun(tmp_path / "bin", pmix_loads)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    plugin, need = cluster_needs.srun_pmi_plugin()
    assert plugin == ("pmix" if pmix_loads else "pmi2") and need.status == "ok"
    if not pmix_loads:
        assert "lacks pmix" in need.text and "can not load PMIx library" in need.text


def test_needs_said_without_a_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun here
    assert cluster_needs.filesystem_type(Path("/proc/self")) == "proc"
    need = cluster_needs.shared_folder(tmp_path, 2)
    assert need.status == "unchecked" and "every node must see it" in need.text
    _plugin, need = cluster_needs.srun_pmi_plugin()
    assert need.status == "unchecked" and "srun is not here" in need.text
    assert cluster_needs.hostfile_need(str(tmp_path / "hosts"), 2).status == "missing"
    (tmp_path / "hosts").write_text("# nodes\nn1:2\nn2:2\nn3:2\n")
    need = cluster_needs.hostfile_need(str(tmp_path / "hosts"), 2)
    assert need.status == "ok" and need.text.endswith("lists n1, n2 (and 1 more, unused)")
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        need = cluster_needs.rendezvous_port(port, None)
        assert need.status == "missing" and f"port {port} is in use" in need.text and "--master-port" in need.text
    assert cluster_needs.rendezvous_port(port, "some-other-node").status == "unchecked"


def test_rank_the_engine_reports_first() -> None:
    """When every rank dies with the engine, its own report names the first: srun by task, MPICH's
    Hydra by pid (mapped through the pids rank 0 recorded)."""
    srun = "srun: error: dbn2: task 3: Killed\nsrun: error: dbn1: tasks 0-2: Exited with exit code 130\n"
    assert engine_casualty(srun, {}) == "srun reports rank 3 on dbn2 first: Killed"
    hydra = (
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 8434 RUNNING AT dbn2\n"
        "=   EXIT CODE: 9\n=   CLEANING UP REMAINING PROCESSES\n"
    )
    named = engine_casualty(hydra, {"rank_pids": [10, 11, 12, 8434]})
    assert named == "mpiexec reports rank 3 on dbn2 first: exit code 9"
    assert engine_casualty(hydra, {}) == "mpiexec reports the process 8434 on dbn2 first: exit code 9"
    assert engine_casualty("Traceback ...", {}) == ""


class _Store:
    """A rendezvous store as a rank's client sees it: working, or gone with the process that held it."""

    def __init__(self, gone: bool) -> None:
        self.gone, self.keys = gone, {}

    def clone(self) -> _Store:
        return self

    def set_timeout(self, timeout: object) -> None:
        pass

    def check(self, keys: list[str]) -> bool:
        if self.gone:
            raise RuntimeError("Connection reset by peer")
        return all(k in self.keys for k in keys)

    def set(self, key: str, value: str) -> None:
        if self.gone:
            raise RuntimeError("Connection reset by peer")
        self.keys[key] = value


def _rank(rank: int, store: _Store) -> rendezvous.Rendezvous:
    """A rank past torch's rendezvous (Rendezvous.__init__ would open a real store)."""
    r = rendezvous.Rendezvous.__new__(rendezvous.Rendezvous)
    r.rank, r.size, r.host, r.store = rank, 4, "dbn2", store
    r.master_addr, r.master_port = "10.0.0.1", 29500
    r.deadline, r.places, r.ifname = time.monotonic() + 60, [], ""
    return r


def test_a_rank_whose_store_is_gone_says_why_it_stops(capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 0 held the store and exited: a rank still waiting says so on its terminal (no traceback)."""
    with pytest.raises(rendezvous.JoinFailed, match="stopped answering"):
        _rank(3, _Store(gone=True))._wait(["never"], "every rank to post its address")
    assert (
        "deepbench: rank 3 on dbn2 could not join: the rendezvous at 10.0.0.1:29500 stopped answering"
        in capsys.readouterr().err
    )


def test_rank_0_keeps_the_store_up_for_the_others_to_read_why(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(rendezvous.time, "sleep", slept.append)
    store = _Store(gone=False)
    _rank(0, store).failed("gloo could not connect")
    assert store.keys[f"{rendezvous.KEY}/join-failed"].startswith("rank 0 on dbn2 could not join")
    assert slept == [rendezvous.STORE_LINGER_S] and rendezvous.STORE_LINGER_S >= 3 * rendezvous.POLL_S
    _rank(2, _Store(gone=False)).failed("gloo could not connect")  # only the rank that holds the store waits
    assert slept == [rendezvous.STORE_LINGER_S]
