"""The system's noise, recorded and warned about (issue 22; kernels/noise.py).

The probes read files and NVML: each is tested on fakes (a sysfs tree, /proc/stat text, an NVML
module), then for real: a run beside a busy process records it in run.json and prints a warning,
and a comparison names the side measured on the loaded machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from deepbench.kernels.catalog import by_id
from deepbench.kernels.noise import (
    CpuState,
    GpuProcess,
    GpuState,
    NoiseRecord,
    Snapshot,
    busy_seconds,
    cpu_state,
    gpu_states,
    judge,
)
from deepbench.kernels.results import RUN_FILE, RunRecord

from .conftest import run_cli
from .reports_synthetic import noisy, result, write_run

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def snap(at: float, busy: float, own: float, load: float = 0.1, gpus: tuple = (), **cpu) -> Snapshot:
    return Snapshot(
        at=T0 + timedelta(seconds=at),
        cpu=CpuState(load_avg=(load, load, load), **cpu),
        gpus=gpus,
        busy_s=busy,
        own_s=own,
    )


def test_busy_seconds_counts_only_the_runs_cpus() -> None:
    stat = "cpu  100 0 100 1000 0 0 0 0 0 0\ncpu0 10 0 10 500 7 0 0 0 0 0\ncpu1 90 5 90 500 0 1 2 3 0 0\n"
    tick = os.sysconf("SC_CLK_TCK")
    assert busy_seconds((0,), stat) == 20 / tick  # iowait (7) is idle time
    assert busy_seconds((1,), stat) == 191 / tick


def test_cpu_state_reads_governor_turbo_and_load(tmp_path: Path) -> None:
    for c, gov in ((0, "powersave"), (1, "powersave")):
        d = tmp_path / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(gov + "\n")
        (d / "scaling_cur_freq").write_text(str(2_000_000 + c * 100_000))
        (d / "scaling_driver").write_text("intel_pstate")
    (tmp_path / "intel_pstate").mkdir()
    (tmp_path / "intel_pstate" / "no_turbo").write_text("0\n")
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("3.50 2.00 1.00 4/300 1234\n")
    state = cpu_state((0, 1), root=tmp_path, loadavg=loadavg)
    assert state.governors == {"powersave": 2} and state.turbo is True and state.mhz == (2000.0, 2100.0)
    assert state.load_avg == (3.5, 2.0, 1.0) and state.runnable == 4 and state.scaling_driver == "intel_pstate"
    record = judge(snap(0, 0, 0, governors=state.governors, turbo=True), snap(10, 20, 19), (0, 1), None, False)
    assert not record.warnings  # others: 1 core-second in 10 s, 0.1 core
    assert any("powersave" in n for n in record.notes) and any("turbo" in n for n in record.notes)


def test_other_processes_on_the_runs_cpus_warn() -> None:
    # 10 s, 2 CPUs busy 20 s of which the run used 10: others kept 1 core busy
    loaded = judge(snap(0, 100, 5), snap(10, 120, 15), (0, 1), None, gpu_run=False)
    assert loaded.others_cpu_cores == 1.0 and "1.00 CPU cores" in loaded.warnings[0]
    # the same others beside a run on one of 4 CPUs: 3 were free, no doubt
    assert not judge(snap(0, 100, 5), snap(10, 120, 15), (0, 1, 2, 3), 1, gpu_run=False).warnings
    # several ranks share the CPUs: their time is not the others'
    assert judge(snap(0, 100, 5), snap(10, 120, 15), (0, 1), None, False, shared_cpus=True).others_cpu_cores is None
    # busy before the start
    assert "load average 5.00" in judge(snap(0, 0, 0, load=5.0), None, (0, 1), None, False).warnings[0]


class FakeNvml:
    """The pynvml calls kernels/noise.py makes, on two GPUs: GPU 0 shared with another process,
    held down by heat, persistence off; GPU 1 idle and quiet."""

    NVML_CLOCK_SM = 0
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, own_pid: int) -> None:
        self.procs = {
            0: [SimpleNamespace(pid=own_pid, usedGpuMemory=2 << 30), SimpleNamespace(pid=4242, usedGpuMemory=None)],
            1: [],
        }

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list:
        return self.procs[h]

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return 0 if h == 0 else 1

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return 1200 if h == 0 else 1980

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        return 1980

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=95 if h == 0 else 0)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return 88 if h == 0 else 40

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return 0x40 | 0x4 if h == 0 else 0x1  # hw_thermal + power cap; GPU 1 idle


def test_gpu_state_through_nvml_fakes() -> None:
    gpus = gpu_states(FakeNvml(own_pid=1000))
    assert [g.index for g in gpus] == [0, 1]
    g0, g1 = gpus
    assert [p.pid for p in g0.processes] == [1000, 4242] and g0.processes[0].used_mib == 2048.0
    assert g0.persistence is False and g0.slowdown == ("hw_thermal",) and g0.power_capped is True
    assert g0.sm_mhz == 1200 and g0.utilization_pct == 95 and g0.temperature_c == 88
    assert g1.slowdown == () and g1.power_capped is False and g1.persistence is True
    record = judge(snap(0, 0, 0, gpus=gpus), snap(10, 0, 0, gpus=gpus), (0,), None, gpu_run=True, own_pids={1000})
    text = " ".join(record.warnings)
    assert "GPU 0: 1 other process(es) on it before the run (pids 4242)" in text
    assert "GPU 0: 1 other process(es) on it after the run (pids 4242)" in text
    assert "GPU 0: 95% busy" in text and "hw_thermal" in text and "GPU 1" not in text
    assert any("persistence mode off" in n for n in record.notes)
    # in a container NVML gives host pids: one process after the run is this one
    other = GpuState(index=0, processes=(GpuProcess(pid=77), GpuProcess(pid=78)))
    after = judge(snap(0, 0, 0), snap(10, 0, 0, gpus=(other,)), (0,), None, gpu_run=True, own_pids={1})
    assert "1 other process(es) on it after" in " ".join(after.warnings)


def test_a_run_beside_a_busy_core_warns_and_records_it(tmp_path: Path) -> None:
    """One core kept busy by another process: the run's noise record holds it and the run says so."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        out = tmp_path / "run"
        p = run_cli(
            "deepbench-run",
            "--local",
            "--suite",
            "smoke",
            "--ops",
            "gemm,conv",
            "--fast",
            "--out",
            str(out),
            timeout=600,
        )
    finally:
        busy.kill()
        busy.wait()
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    record = RunRecord.model_validate_json((out / RUN_FILE).read_text())
    assert record.noise is not None and record.noise.after is not None
    assert record.noise.others_cpu_cores is not None and record.noise.others_cpu_cores >= 0.5
    assert "warning: other processes kept" in p.stdout and record.noise.warnings
    # the CPU ceilings were measured with the run's threads: the report has % of peak
    assert record.ceilings["tflops_fp32"] > 0 and record.ceilings["gbps_copy"] > 0
    report = run_cli("deepbench", "report", str(out), "--format", "csv").stdout
    assert "%" in report.split("\n")[1]
    shown = run_cli("deepbench", "report", str(out), env={"COLUMNS": "200"}).stdout
    assert "warning: other processes kept" in shown


def test_compare_names_the_side_measured_on_a_loaded_machine(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    ks = [by_id()[i] for i in ("gemm/train/000", "gemm/train/001")]
    quiet = write_run(tmp_path / "quiet", [result(k, "fp32", noisy(k, 1.0, 0.01, 10, rng)) for k in ks])
    busy = write_run(tmp_path / "busy", [result(k, "fp32", noisy(k, 1.3, 0.01, 10, rng)) for k in ks])
    record = json.loads((busy / RUN_FILE).read_text())
    noise = NoiseRecord(
        before=snap(0, 0, 0),
        after=snap(10, 30, 10),
        cpus=(0, 1),
        others_cpu_cores=2.0,
        warnings=("other processes kept 2.00 CPU cores busy on average during the run",),
    )
    record["noise"] = noise.model_dump(mode="json")
    (busy / RUN_FILE).write_text(json.dumps(record))
    for fmt in ("table", "md", "html"):
        out = tmp_path / f"cmp.{fmt}"
        p = run_cli(
            "deepbench", "compare", str(quiet), str(busy), "--format", fmt, "--out", str(out), env={"COLUMNS": "160"}
        )
        assert p.returncode == 0, p.stderr
        text = " ".join(out.read_text().split())
        assert "busy was measured on a loaded machine" in text and "quiet was measured" not in text
        assert "busy vs quiet: 1.3" in text and "x slower" in text
