"""How quiet the machine was: the system's noise before and after a run, and what it makes doubtful.

A second smoke run right after CI read some kernels 2-80x slower, and nothing in it said why.
pyperf's model (`pyperf system show`): record the state that moves timings (the load, the CPU
frequency governor and turbo; on GPUs other processes, clocks, persistence mode and why the clock
is held down) and warn when it makes figures doubtful.

What is measured, and why this way:
- the CPU time other processes used on the CPUs this run may use, over the run: /proc/stat's busy
  time of those CPUs minus this process's own (os.times), per second of the run. Load averages are
  recorded too, but they lag a minute and count the run itself;
- the governor and turbo state of those CPUs (sysfs cpufreq, intel_pstate/no_turbo, cpufreq/boost);
- per GPU through NVML (nvidia-ml-py, optional): compute processes, SM clock against its maximum,
  utilisation, temperature, persistence mode, and the slowdown reasons NVML gives (thermal, power
  brake, hardware slowdown).

Warnings name what makes figures doubtful (other work on the run's CPUs or GPUs, a GPU held down by
heat or hardware); notes name what only makes runs differ from one another (a power-saving
governor, turbo on, persistence off: pyperf's advice). Every probe is optional: what cannot be read
stays empty. Nothing here imports PyTorch; the NVML module is passed in so that tests can fake it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CPU_ROOT = Path("/sys/devices/system/cpu")
PROC_STAT = Path("/proc/stat")
PROC_LOADAVG = Path("/proc/loadavg")
# /proc/stat columns: user nice system idle iowait irq softirq steal (guest is inside user)
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
# Other processes keeping at least this many CPU cores busy on average, beyond the cores the run
# left free, make the run's figures doubtful (a quarter of a core: a background daemon's share
# stays well under it, one busy process is four times over it).
OTHERS_CORES_WARN = 0.25
# /proc/stat counts in ticks (10 ms): a stretch shorter than this says nothing about the others.
MIN_WINDOW_S = 0.05
QUIET_PROBE_S = 0.3  # how long the default thread count watches the others before a CPU run
GPU_BUSY_PCT = 10.0  # a GPU this busy before the run starts is running someone else's work
MIB = 2**20
# NVML clock event reason bits that hold the clock down for reasons other than the power limiter's
# normal regulation (the bits kernels/timing/clocks.py reads during samples; idle and application
# clock settings are not slowdowns, the power cap is the limiter's normal swing).
DOUBTFUL_REASONS = {"hw_slowdown": 0x8, "sw_thermal": 0x20, "hw_thermal": 0x40, "hw_power_brake": 0x80}
POWER_CAP_BIT = 0x4


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CpuState(_Model):
    load_avg: tuple[float, float, float] | None = Field(None, description="1, 5 and 15 minute load averages")
    runnable: int | None = Field(None, description="tasks running or ready to run (/proc/loadavg)")
    governors: dict[str, int] = Field(default_factory=dict, description="cpufreq governor -> CPUs of the run using it")
    scaling_driver: str = ""
    turbo: bool | None = Field(None, description="turbo/boost enabled (None: not readable, e.g. a VM)")
    mhz: tuple[float, float] | None = Field(None, description="lowest and highest current clock of the run's CPUs")


class GpuProcess(_Model):
    pid: int
    used_mib: float | None = None


class GpuState(_Model):
    index: int
    processes: tuple[GpuProcess, ...] = ()
    persistence: bool | None = None
    sm_mhz: float | None = None
    max_sm_mhz: float | None = None
    utilization_pct: float | None = None
    temperature_c: float | None = None
    slowdown: tuple[str, ...] = Field((), description="NVML's active slowdown reasons besides the power cap")
    power_capped: bool | None = None


class Snapshot(_Model):
    at: datetime
    cpu: CpuState
    gpus: tuple[GpuState, ...] = ()
    busy_s: float | None = Field(None, description="/proc/stat busy seconds of the run's CPUs, since boot")
    own_s: float | None = Field(None, description="this process's CPU seconds so far (user + system)")


class NoiseRecord(_Model):
    """run.json's `noise`: the snapshots, what other processes took during the run, and the verdict."""

    before: Snapshot
    after: Snapshot | None = None
    cpus: tuple[int, ...] = Field((), description="the CPUs the run may use (affinity)")
    threads: int | None = Field(None, description="CPU threads the run used (None: all of `cpus`)")
    others_cpu_cores: float | None = Field(
        None, description="CPU cores other processes kept busy on average, on the run's CPUs, while it ran"
    )
    warnings: tuple[str, ...] = Field((), description="what makes the figures doubtful")
    notes: tuple[str, ...] = Field((), description="what makes runs differ from one another (pyperf's advice)")


# ----- reading the state ------------------------------------------------------------------------
def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def usable_cpus() -> tuple[int, ...]:
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return tuple(range(os.cpu_count() or 1))


def busy_seconds(cpus: tuple[int, ...], stat: str | None = None) -> float | None:
    """Busy time of `cpus` since boot, from /proc/stat's per-CPU lines."""
    text = stat if stat is not None else _read(PROC_STAT)
    if not text:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    ticks = 0
    for line in text.splitlines():
        name, *values = line.split()
        if name in wanted:
            ticks += sum(int(values[i]) for i in BUSY_FIELDS if i < len(values))
    return ticks / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """This process's CPU time, and its ended helpers' (cuDNN's engine race: its own process)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def cpu_state(cpus: tuple[int, ...], root: Path = CPU_ROOT, loadavg: Path = PROC_LOADAVG) -> CpuState:
    governors: dict[str, int] = {}
    mhz = []
    for c in cpus:
        gov = _read(root / f"cpu{c}" / "cpufreq" / "scaling_governor")
        if gov:
            governors[gov] = governors.get(gov, 0) + 1
        cur = _read(root / f"cpu{c}" / "cpufreq" / "scaling_cur_freq")
        if cur and cur.isdigit():
            mhz.append(int(cur) / 1000)
    no_turbo, boost = _read(root / "intel_pstate" / "no_turbo"), _read(root / "cpufreq" / "boost")
    turbo = no_turbo == "0" if no_turbo in ("0", "1") else boost == "1" if boost in ("0", "1") else None
    load = runnable = None
    text = _read(loadavg)
    if text:
        parts = text.split()
        try:
            load = (float(parts[0]), float(parts[1]), float(parts[2]))
            runnable = int(parts[3].split("/")[0])
        except (IndexError, ValueError):
            pass
    driver = _read(root / f"cpu{cpus[0]}" / "cpufreq" / "scaling_driver") if cpus else None
    return CpuState(
        load_avg=load,
        runnable=runnable,
        governors=governors,
        scaling_driver=driver or "",
        turbo=turbo,
        mhz=(min(mhz), max(mhz)) if mhz else None,
    )


def gpu_states(nv: Any) -> tuple[GpuState, ...]:
    """Every GPU NVML sees; `nv` is the pynvml module (initialised), or a test's fake."""

    def get(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - a query this GPU or driver lacks stays empty
            return None

    def state(i: int) -> GpuState:
        """One GPU's state (a function of its own, so the queries' closures hold this GPU's handle)."""
        h = nv.nvmlDeviceGetHandleByIndex(i)
        procs = get(lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)) or []
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        mask = get(lambda: int(reasons_fn(h))) if reasons_fn else None
        util = get(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        persistence = get(lambda: nv.nvmlDeviceGetPersistenceMode(h))
        return GpuState(
            index=i,
            processes=tuple(
                GpuProcess(
                    pid=int(p.pid),
                    used_mib=None if getattr(p, "usedGpuMemory", None) is None else round(p.usedGpuMemory / MIB, 1),
                )
                for p in procs
            ),
            persistence=None if persistence is None else bool(persistence),
            sm_mhz=get(lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))),
            max_sm_mhz=get(lambda: float(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))),
            utilization_pct=None if util is None else float(util.gpu),
            temperature_c=get(lambda: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))),
            slowdown=() if mask is None else tuple(n for n, bit in DOUBTFUL_REASONS.items() if mask & bit),
            power_capped=None if mask is None else bool(mask & POWER_CAP_BIT),
        )

    return tuple(state(i) for i in range(nv.nvmlDeviceGetCount()))


def _nvml_gpus() -> tuple[GpuState, ...]:
    try:
        import pynvml  # optional: nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML, no NVIDIA driver: no GPU state
        return ()
    try:
        return gpu_states(pynvml)
    except Exception:  # noqa: BLE001
        return ()
    finally:
        pynvml.nvmlShutdown()


def snapshot(cpus: tuple[int, ...] | None = None, gpus: Callable[[], tuple[GpuState, ...]] = _nvml_gpus) -> Snapshot:
    cpus = cpus if cpus is not None else usable_cpus()
    return Snapshot(
        at=datetime.now(timezone.utc), cpu=cpu_state(cpus), gpus=gpus(), busy_s=busy_seconds(cpus), own_s=own_seconds()
    )


class CpuWindow:
    """Other processes' CPU time on the run's CPUs over a stretch of this process's work (the
    samples of one kernel): /proc/stat's busy time of those CPUs minus this process's own."""

    def __init__(self, cpus: tuple[int, ...] | None = None) -> None:
        self.cpus = cpus if cpus is not None else usable_cpus()
        self.busy, self.own, self.start = busy_seconds(self.cpus), own_seconds(), time.monotonic()

    def others_cores(self) -> float | None:
        """Cores the others kept busy on average since the start; None over too short a stretch
        for /proc/stat's ticks (MIN_WINDOW_S) or where it cannot be read."""
        wall = time.monotonic() - self.start
        busy = busy_seconds(self.cpus)
        if busy is None or self.busy is None or wall < MIN_WINDOW_S:
            return None
        return max(0.0, (busy - self.busy) - (own_seconds() - self.own)) / wall


def contended(others: float | None, spare: int | None) -> bool:
    """Other processes held CPUs the run's threads used: they kept busy more cores than the run
    left free, by more than OTHERS_CORES_WARN (the issue-42 case: a core kept busy under a
    two-thread run on two CPUs read 100x slow at a tight IQR)."""
    return others is not None and spare is not None and others > spare + OTHERS_CORES_WARN


def quiet_threads(
    cpus: tuple[int, ...] | None = None, window_s: float = QUIET_PROBE_S, cores: int | None = None
) -> int:
    """The default CPU thread count: one per usable CPU (or per core of `cores`, a library that wants
    one thread per physical core), less the cores other processes keep busy (measured over `window_s`
    while this process waits), so that a run leaves a busy core alone; at least one."""
    cpus = cpus if cpus is not None else usable_cpus()
    window = CpuWindow(cpus)
    time.sleep(window_s)
    others = window.others_cores() or 0.0
    return max(1, (cores or len(cpus)) - max(0, math.ceil(others - OTHERS_CORES_WARN)))


# ----- the verdict --------------------------------------------------------------------------
def others_cores(before: Snapshot, after: Snapshot) -> float | None:
    """CPU cores other processes kept busy on average between the two snapshots."""
    if None in (before.busy_s, after.busy_s, before.own_s, after.own_s):
        return None
    wall = (after.at - before.at).total_seconds()
    if wall <= 0:
        return None
    return max(0.0, (after.busy_s - before.busy_s) - (after.own_s - before.own_s)) / wall  # type: ignore[operator]


def judge(
    before: Snapshot,
    after: Snapshot | None,
    cpus: tuple[int, ...],
    threads: int | None,
    gpu_run: bool,
    own_pids: set[int] | None = None,
    shared_cpus: bool = False,
) -> NoiseRecord:
    """The record with its warnings and notes. `threads`: CPU threads the run used (None: all);
    a GPU run needs one (the thread that launches). `shared_cpus`: several ranks of this run share
    the CPUs, so the others' share cannot be told from the run's own."""
    own_pids = own_pids or {os.getpid()}
    warnings: list[str] = []
    notes: list[str] = []
    others = None if after is None or shared_cpus else others_cores(before, after)
    needed = 1 if gpu_run else (threads or len(cpus))
    spare = max(0, len(cpus) - needed)
    if others is not None and others > spare + OTHERS_CORES_WARN:
        warnings.append(
            f"other processes kept {others:.2f} CPU cores busy on average during the run, on the "
            f"{len(cpus)} CPUs it used ({needed} for its threads): figures may read slow or noisy"
        )
    load = before.cpu.load_avg
    if load and load[0] > len(cpus):
        warnings.append(f"the machine was busy when the run started: load average {load[0]:.2f} on {len(cpus)} CPUs")
    for snap, when in ((before, "before"), (after, "after")):
        if snap is None:
            continue
        for g in snap.gpus:
            others_on_gpu = [p for p in g.processes if p.pid not in own_pids]
            if gpu_run and when == "after" and others_on_gpu and len(others_on_gpu) == len(g.processes):
                others_on_gpu = others_on_gpu[1:]  # in a container NVML gives host pids: one of them is this run
            if others_on_gpu:
                warnings.append(
                    f"GPU {g.index}: {len(others_on_gpu)} other process(es) on it {when} the run "
                    f"(pids {', '.join(str(p.pid) for p in others_on_gpu[:5])})"
                )
            if when == "before" and g.utilization_pct is not None and g.utilization_pct > GPU_BUSY_PCT:
                warnings.append(f"GPU {g.index}: {g.utilization_pct:.0f}% busy before the run started")
            if g.slowdown:
                warnings.append(f"GPU {g.index}: clock held down {when} the run ({', '.join(g.slowdown)})")
    governors = before.cpu.governors
    if governors and set(governors) != {"performance"}:
        notes.append(
            f"CPU frequency governor {', '.join(sorted(governors))} (pyperf advises 'performance' "
            "for repeatable figures)"
        )
    if before.cpu.turbo:
        notes.append("turbo boost on: the CPU clock follows load and temperature (pyperf advises it off)")
    if any(g.persistence is False for g in before.gpus):
        notes.append("GPU persistence mode off: the driver may reinitialise the GPU between runs")
    return NoiseRecord(
        before=before,
        after=after,
        cpus=cpus,
        threads=threads,
        others_cpu_cores=others,
        warnings=tuple(warnings),
        notes=tuple(notes),
    )
