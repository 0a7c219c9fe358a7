"""How torch.distributed ranks on several hosts find each other, and say who is missing.

torch.distributed's own `env://` start leaves three traps that real clusters fall into:
- gloo (and NCCL's bootstrap) bind their sockets to the address the machine's hostname resolves
  to, and Debian-style hosts resolve their own name to 127.0.1.1: a rank then advertises a
  loopback address, the ranks on other hosts cannot connect to it, and the one that finds out
  exits while the others wait for the whole timeout;
- a rank that fails while joining tells no one;
- a rank that disappears mid-run (killed, its host cut off) is reported by the library as a
  broken socket or a timeout, naming neither the rank nor its host.

So the ranks meet in torch's TCP store first (rank 0 hosts it at MASTER_ADDR:MASTER_PORT, or
torchrun's agent does), and through it:
- each rank posts its host and the address its route to the master leaves from; the
  collective's sockets then bind to the interface holding that address (GLOO_SOCKET_IFNAME,
  NCCL_SOCKET_IFNAME), unless the user set them. A rank on the master's own host, whose route to
  MASTER_ADDR is the loopback (the master's name resolving to 127.0.1.1 there), takes the
  interface that reaches the ranks on other hosts; ranks that all share one host use the loopback;
- a rank that fails to join posts its reason, and every other rank stops within a poll interval
  with that reason instead of waiting for the timeout;
- after a collective breaks, every rank that can still reach the store says so, and rank 0 names
  the ranks (and hosts) that did not answer.

The interface is found by address (ioctl SIOCGIFADDR for IPv4, /proc/net/if_inet6 for IPv6):
the standard library has no getifaddrs, and the harness keeps to the libraries it already has."""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from .terminal import say_on_terminal

KEY = "deepbench"  # prefix of our keys in the store, apart from torch's own
POLL_S = 0.1
# Longest wait for every rank to reach the store and for the collective's connections (the ranks
# of one job start within seconds of each other; a slow node's Python imports take a few more).
JOIN_TIMEOUT_S = 120.0
# After a collective broke, how long rank 0 waits for the other ranks to say they are still there.
CENSUS_S = 5.0
# Rank 0 holds the store (except under torchrun, whose agent does): after posting why it cannot join, it keeps
# the store up this long, so that every rank polling it (every POLL_S) reads the reason before the store goes.
STORE_LINGER_S = 10 * POLL_S
IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
SIOCGIFADDR = 0x8915
IFREQ_ADDR = slice(20, 24)  # struct ifreq: 16 bytes of name, then a sockaddr_in (family, port, address)


class JoinFailed(RuntimeError):
    """This rank, or another one, could not join the group: the reason names the rank and host."""


@dataclass(frozen=True)
class RankPlace:
    rank: int
    host: str
    address: str  # the address this rank's route to the master leaves from
    pid: int = 0

    def label(self) -> str:
        return f"rank {self.rank} on {self.host}"


# ----- the interface that reaches the master ---------------------------------------------------------
def resolve(host: str, port: int) -> str:
    """The address a TCP connection to host:port would use first."""
    return str(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0])


def source_address(address: str, port: int = 9) -> str:
    """The local address a packet to `address` would leave from (connecting a UDP socket sends
    nothing: the kernel only picks the route)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((address, port))
        return s.getsockname()[0]


def interface_of(address: str) -> str | None:
    """The name of the interface that holds `address`, or None."""
    want = ipaddress.ip_address(address.split("%")[0])
    if want.version == 6:
        try:
            with open("/proc/net/if_inet6") as f:
                for line in f:
                    fields = line.split()
                    if ipaddress.ip_address(int(fields[0], 16)) == want:
                        return fields[-1]
        except OSError:
            return None
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                ifreq = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address on this interface
                continue
            if socket.inet_ntoa(ifreq[IFREQ_ADDR]) == str(want):
                return name
    return None


def choose_interface(me: RankPlace, everyone: list[RankPlace]) -> str | None:
    """The interface this rank's collective sockets should use (see the module's docstring)."""
    if not ipaddress.ip_address(me.address.split("%")[0]).is_loopback:
        return interface_of(me.address)
    elsewhere = [p for p in everyone if p.host != me.host and not ipaddress.ip_address(p.address).is_loopback]
    if not elsewhere:
        return interface_of(me.address)  # every rank on this host: the loopback
    return interface_of(source_address(elsewhere[0].address))


# ----- joining -----------------------------------------------------------------------------------
class Rendezvous:
    """The ranks' meeting point: torch's TCP store, with our keys beside torch's."""

    def __init__(self, rank: int, size: int, join_timeout_s: float = JOIN_TIMEOUT_S) -> None:
        self.rank, self.size = rank, size
        self.host = socket.gethostname()
        self.master_addr = os.environ["MASTER_ADDR"]
        self.master_port = int(os.environ.get("MASTER_PORT", "29500"))
        self.deadline = time.monotonic() + join_timeout_s
        self.join_timeout = timedelta(seconds=join_timeout_s)
        self.places: list[RankPlace] = []
        self.ifname = ""
        self.ifname_from = ""  # the user's variable, or the route to the master
        self.rounds = 0
        self.store: Any = None
        try:
            # rank 0 hosts the store (torchrun's agent does under torchrun) and waits there for the
            # others; a busy port or an unreachable master ends here, with torch's reason
            self.store = next(dist.rendezvous("env://", rank=rank, world_size=size, timeout=self.join_timeout))[0]
        except Exception as exc:
            raise self.failed(
                f"could not reach the rendezvous at {self.master_addr}:{self.master_port} "
                f"(MASTER_ADDR, MASTER_PORT): {exc}"
            ) from exc

    def label(self) -> str:
        return f"rank {self.rank} on {self.host}"

    def failed(self, reason: str) -> JoinFailed:
        """This rank cannot join: tell the others through the store (if it is reachable) and the
        terminal (every rank's stderr reaches it under srun and mpirun)."""
        message = f"{self.label()} could not join: {reason}"
        if self.store is not None:
            try:
                self._client().set(f"{KEY}/join-failed", message)
            except Exception:  # noqa: BLE001 - the store is gone too: the terminal still hears of it
                pass
            else:
                if self.rank == 0:
                    time.sleep(STORE_LINGER_S)
        say_on_terminal(f"deepbench: {message}")
        return JoinFailed(message)

    def _client(self, timeout_s: float = CENSUS_S) -> Any:
        """A connection of this thread's own to the store (a client is not shared between
        threads), that gives up after `timeout_s`."""
        client = self.store.clone()
        client.set_timeout(timedelta(seconds=timeout_s))
        return client

    def _wait(self, keys: list[str], what: str, busy: Callable[[], bool] = lambda: True) -> None:
        """Until every key is in the store, another rank posts its failure, `busy` turns False
        or the join deadline passes."""
        watcher = self._client(max(CENSUS_S, self.deadline - time.monotonic()))
        try:
            while busy() and not (keys and watcher.check(keys)):
                if watcher.check([f"{KEY}/join-failed"]):
                    other = watcher.get(f"{KEY}/join-failed").decode()
                    say_on_terminal(f"deepbench: {self.label()} stops: {other}")
                    raise JoinFailed(other)
                if time.monotonic() > self.deadline:
                    raise self.failed(f"waited {self.join_timeout.total_seconds():g} s for {what}")
                time.sleep(POLL_S)
        except JoinFailed:
            raise
        except Exception as exc:  # the store's process (rank 0) is gone: say so, not a traceback
            raise self.failed(
                f"the rendezvous at {self.master_addr}:{self.master_port} stopped answering "
                f"while waiting for {what} (rank 0, which holds it, has stopped): "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def meet(self) -> None:
        """Every rank posts where it is; then this rank picks its interface."""
        try:
            address = source_address(resolve(self.master_addr, self.master_port))
        except OSError as exc:
            raise self.failed(f"no route to MASTER_ADDR={self.master_addr}: {exc}") from exc
        self.store.set(
            f"{KEY}/place/{self.rank}", json.dumps({"host": self.host, "address": address, "pid": os.getpid()})
        )
        keys = [f"{KEY}/place/{r}" for r in range(self.size)]
        self._wait(keys, "every rank to post its address")
        self.places = [RankPlace(r, **json.loads(v)) for r, v in enumerate(self.store.multi_get(keys))]
        me = self.places[self.rank]
        chosen = [v for v in IFNAME_VARS if os.environ.get(v)]
        if chosen:  # the user's choice stands
            self.ifname, self.ifname_from = os.environ[chosen[0]], chosen[0]
            return
        ifname = choose_interface(me, self.places)
        if ifname:
            self.ifname, self.ifname_from = ifname, "the route to MASTER_ADDR"
            for var in IFNAME_VARS:
                os.environ[var] = ifname

    def init_process_group(self, backend: str, collective_timeout: timedelta) -> None:
        """torch's process group on our store, watching for another rank's failure meanwhile
        (gloo connects every pair here: a rank that cannot reach another one fails alone)."""
        outcome: dict[str, BaseException] = {}

        def init() -> None:
            try:
                dist.init_process_group(
                    backend, store=self.store, rank=self.rank, world_size=self.size, timeout=self.join_timeout
                )
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                outcome["error"] = exc

        worker = threading.Thread(target=init, name="deepbench-join", daemon=True)
        worker.start()
        self._wait([], "the collective's connections", busy=worker.is_alive)
        if "error" in outcome:
            exc = outcome["error"]
            hint = f" (its sockets use {self.ifname}, from {self.ifname_from})" if self.ifname else ""
            raise self.failed(f"{type(exc).__name__}: {exc}{hint}") from exc
        set_timeout = getattr(dist.distributed_c10d, "_set_pg_timeout", None)
        if set_timeout is not None:  # joining is bounded by the join timeout, each collective by its own
            set_timeout(collective_timeout)

    def settled(self) -> None:
        """Every group is made: from now on the store only hears a census, which must not wait
        long for a master that is gone or out of reach (clients inherit this timeout)."""
        self.store.set_timeout(timedelta(seconds=CENSUS_S))

    # ----- who is still there ----------------------------------------------------------------
    def census(self) -> str:
        """After a collective broke: every rank that can says it is alive; rank 0 names those
        that did not answer within CENSUS_S ('' on other ranks, or when all answered)."""
        self.rounds += 1
        try:
            client = self._client()
            client.set(f"{KEY}/alive/{self.rounds}/{self.rank}", "1")
        except Exception:  # noqa: BLE001 - the store (on the master's host) is out of reach
            return ""
        if self.rank != 0:
            return ""
        keys = {r: f"{KEY}/alive/{self.rounds}/{r}" for r in range(self.size)}
        deadline = time.monotonic() + CENSUS_S
        missing = list(keys)
        while missing and time.monotonic() < deadline:
            time.sleep(POLL_S)
            missing = [r for r in missing if not client.check([keys[r]])]
        if not missing:
            return ""
        gone = ", ".join(self.places[r].label() if self.places else f"rank {r}" for r in missing)
        return f"no answer within {CENSUS_S:g} s from {gone} (dead, stuck or cut off)"

    def facts(self) -> dict[str, Any]:
        return {
            "rank_hosts": [p.host for p in self.places],
            "rank_pids": [p.pid for p in self.places],
            "socket_ifname": self.ifname,
            "master": f"{self.master_addr}:{self.master_port}",
        }
