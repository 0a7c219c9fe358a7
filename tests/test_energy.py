"""Energy per part (--energy; kernels/timing/energy.py and meters.py): the loop around a meter on
a fake NVML whose counter moves in steps, RAPL from a recorded powercap tree (and its wraparound),
a Raspberry Pi 5's PMIC from a recorded `vcgencmd pmic_read_adc`, the reasons where there is no
meter, and a real CPU run that records energy or says why not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.results import Energy, Measurement, PowerState
from deepbench.kernels.results_file import read_results
from deepbench.kernels.timing import energy as energy_mod
from deepbench.kernels.timing.clocks import ClockReader
from deepbench.kernels.timing.energy import MIN_UPDATES, NoEnergy, measure_energy, run_loop, update_period
from deepbench.kernels.timing.meters import cpu_meter, nvml_meter, parse_pmic, pi_meter, rapl_meter

from .conftest import run_cli
from .fake_nvml import FakeNvml, FakeTime

FIXTURES = Path(__file__).parent / "fixtures"
POWERCAP = FIXTURES / "power" / "powercap.txt"
PMIC = (FIXTURES / "power" / "pi5_pmic_read_adc.txt").read_text()
BOARDS = FIXTURES / "boards"


def powercap_tree(root: Path) -> Path:
    """The recorded powercap tree (fixtures/power/powercap.txt: one `PATH VALUE` line per file) under `root`."""
    for line in POWERCAP.read_text().splitlines():
        name, value = line.split(" ", 1)
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(value + "\n")
    return root


class FakeGpu:
    """Chunks of `chunk_s` queued on a fake device: each finishes `chunk_s` after the previous one."""

    def __init__(self, clock: FakeTime, chunk_s: float) -> None:
        self.clock, self.chunk_s, self.busy_until, self.started = clock, chunk_s, 0.0, 0

    def start(self):
        self.busy_until = max(self.busy_until, self.clock.t) + self.chunk_s
        self.started += 1
        end = self.busy_until
        return lambda: self.clock.t >= end

    def drain(self) -> None:
        self.clock.t = max(self.clock.t, self.busy_until)


def gpu_meter(clock: FakeTime, **kw):
    meter = nvml_meter(ClockReader.of(FakeNvml(clock, **kw), "handle-0"))
    assert not isinstance(meter, str)
    return meter


def test_counter_steps_do_not_bias_the_energy() -> None:
    clock = FakeTime()
    meter = gpu_meter(clock, watts=650.0, period_s=0.02)
    gpu = FakeGpu(clock, chunk_s=0.001)
    e = measure_energy(gpu.start, 100, 0.001, meter, 0.5, now=clock, drain=gpu.drain)
    assert e.meter == "nvml-total-energy" and e.updates >= MIN_UPDATES and e.window_s >= 0.5
    assert e.watts == pytest.approx(650.0, rel=0.01)  # update to update: whole steps only
    assert e.update_period_s == pytest.approx(0.02, rel=0.02)
    assert e.calls == gpu.started * 100 and e.loop_us_per_call == pytest.approx(10.0, rel=0.05)
    assert e.joules_per_call == pytest.approx(650.0 * 10e-6, rel=0.05)
    assert e.sampled_joules == pytest.approx(e.joules, rel=0.01) and e.power_samples > 100
    assert e.power_limit_w == 700.0 and e.before is not None and e.before.throttle == ("sw_power_cap",)
    assert e.before.mem_mhz == 2619 and e.after is not None and e.after.temperature_c == 61
    rated = e.rated(flops=2e9, min_bytes=4e6)
    assert rated.gflops_per_j == pytest.approx(2 / e.joules_per_call) and rated.gb_per_j == pytest.approx(
        4e-3 / e.joules_per_call
    )
    assert Energy.model_validate_json(rated.model_dump_json()) == rated


@pytest.mark.parametrize(("instant", "reading"), [(True, "nvml-instant"), (False, "nvml-average")])
def test_power_reading_is_the_instant_field_where_offered(instant: bool, reading: str) -> None:
    """NVML_FI_DEV_POWER_INSTANT is sampled where the driver gives it (nvmlDeviceGetPowerUsage is a
    1 s average on Ampere and newer), the averaged reading elsewhere; the record names which."""
    clock = FakeTime()
    fake = FakeNvml(clock, watts=500.0, instant=instant)
    fake.nvmlDeviceGetPowerUsage = lambda handle: 400_000  # type: ignore[method-assign] # told apart from the field
    meter = nvml_meter(ClockReader.of(fake, "handle-0"))
    assert not isinstance(meter, str) and meter.power_reading == reading
    assert meter.power_w() == (500.0 if instant else 400.0)
    gpu = FakeGpu(clock, chunk_s=0.001)
    e = measure_energy(gpu.start, 100, 0.001, meter, 0.5, now=clock, drain=gpu.drain)
    assert e.power_reading == reading and e.sampled_joules is not None
    assert e.sampled_joules / e.joules == pytest.approx(1.0 if instant else 0.8, rel=0.01)


def test_slow_counter_lengthens_the_window() -> None:
    """A counter updated every 100 ms: ten updates need a second, whatever the window asked."""
    clock = FakeTime()
    gpu = FakeGpu(clock, chunk_s=0.002)
    e = measure_energy(gpu.start, 1, 0.002, gpu_meter(clock, period_s=0.1), 0.2, now=clock, drain=gpu.drain)
    assert e.window_s >= MIN_UPDATES * 0.1 * 0.99 and e.watts == pytest.approx(650.0, rel=0.01)


def test_a_counter_that_never_moves_gives_no_figure_and_drains() -> None:
    clock = FakeTime()
    meter = gpu_meter(clock, period_s=1e9)
    gpu = FakeGpu(clock, chunk_s=0.01)
    with pytest.raises(NoEnergy, match="updated 0 times"):
        run_loop(gpu.start, 1, 0.01, meter, 0.5, now=clock, drain=gpu.drain, max_window_s=2.0)
    assert clock.t >= gpu.busy_until  # the queued work was waited for


def test_no_counter_says_why() -> None:
    clock = FakeTime()
    assert "no total-energy counter" in str(nvml_meter(ClockReader.of(FakeNvml(clock, energy=False), "h")))
    assert "NVML is not available" in str(nvml_meter(ClockReader.of(None, None)))


def test_update_period_is_measured() -> None:
    clock = FakeTime()
    assert update_period(gpu_meter(clock, period_s=0.025), now=clock, sleep=clock.sleep) == pytest.approx(
        0.025, rel=0.05
    )


def test_rapl_reads_packages_and_unwraps(tmp_path: Path) -> None:
    tree = powercap_tree(tmp_path / "powercap")
    meter = rapl_meter(tree)
    assert not isinstance(meter, str) and [z.name for z in meter.zones] == ["intel-rapl:0", "intel-rapl:1"]
    first = meter.energy_j()
    assert first == pytest.approx((187462519031 + 201887730112) / 1e6)  # packages only, not core/uncore/dram
    # package 0 wraps past its range (262143328850 uJ), package 1 gains 2 J
    (tree / "intel-rapl:0" / "energy_uj").write_text("999999")  # wrapped: 262143328851 - 187462519031 + 999999 uJ
    (tree / "intel-rapl:1" / "energy_uj").write_text(str(201887730112 + 2_000_000))
    gained = meter.energy_j() - first
    assert gained == pytest.approx((262143328850 + 1 - 187462519031 + 999999 + 2_000_000) / 1e6)


def test_rapl_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "no intel-rapl:N zone" in str(rapl_meter(tmp_path / "absent"))
    monkeypatch.setattr("deepbench.kernels.timing.meters.os.access", lambda path, mode: False)
    assert "readable by root only" in str(rapl_meter(powercap_tree(tmp_path / "powercap")))


def test_pi5_pmic_rails() -> None:
    rails = parse_pmic(PMIC)
    assert len(rails) == 12 and "EXT5V" not in rails and "BATT" not in rails
    assert rails["VDD_CORE"] == pytest.approx(2.60838 * 0.8421619)
    meter = pi_meter("Raspberry Pi 5 Model B Rev 1.0", read=lambda: PMIC, which=lambda _: "/usr/bin/vcgencmd")
    assert not isinstance(meter, str) and meter.power_w() == pytest.approx(sum(rails.values()))
    assert meter.energy_j() is None and 3.0 < meter.power_w() < 4.0


def test_pi5_energy_from_sampled_rails() -> None:
    """A power-only meter: its samples integrated over the window."""
    clock = FakeTime(step_s=0.01)  # a vcgencmd call takes ~10 ms
    meter = pi_meter("Raspberry Pi 5 Model B Rev 1.0", read=lambda: PMIC, which=lambda _: "/usr/bin/vcgencmd")
    assert not isinstance(meter, str)
    e = measure_energy(energy_mod.synchronous(lambda: None, 10), 10, 0.001, meter, 0.3, now=clock, queue_ahead_s=0)
    assert e.meter == "pi5-pmic" and e.watts == pytest.approx(sum(parse_pmic(PMIC).values()))
    assert e.sampled_joules is None and e.updates >= MIN_UPDATES


def test_boards_without_a_meter_say_why() -> None:
    pi4 = cpu_meter(BOARDS / "pi4" / "proc" / "device-tree" / "model")
    assert isinstance(pi4, str) and "Raspberry Pi 4 Model B has no power meter" in pi4
    # the recorded Pi 5 has no vcgencmd (a container without it mounted)
    pi5 = cpu_meter(BOARDS / "pi5" / "proc" / "device-tree" / "model", which=lambda _: None)
    assert isinstance(pi5, str) and "vcgencmd is not installed" in pi5


def test_old_measurements_load_without_energy() -> None:
    m = Measurement.of(
        [1.0, 2.0], method="x", calls_per_sample=1, warmup_calls=0, stop_reason="converged", target_rel_precision=0.01
    )
    assert m.energy is None and Measurement.model_validate_json(m.model_dump_json(exclude={"energy"})) == m
    with pytest.raises(ValueError, match="watts is not joules"):
        Energy(
            meter="m",
            joules=1.0,
            window_s=1.0,
            watts=2.0,
            calls=1,
            loop_us_per_call=1.0,
            joules_per_call=2e-6,
            updates=10,
            before=PowerState(),
        )


def test_cpu_run_records_energy_or_why(tmp_path: Path) -> None:
    """A real run: this machine's meter read (RAPL where readable), or each part says why not."""
    out = tmp_path / "run"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "smoke",
        "--fast",
        "--ops",
        "gemm",
        "--limit",
        "1",
        "--energy",
        "--energy-window",
        "0.2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    results = read_results(out / "results.jsonl")
    assert results and json.loads((out / "plan.json").read_text())["settings"]["energy"] is True
    for part in (p for r in results for p in r.parts):
        energy = part.measurement.energy
        if energy is None:
            assert part.info["energy_error"] == cpu_meter()  # the same reason, said once per part
        else:
            assert energy.meter == "rapl-package" and energy.joules_per_call > 0 and energy.gflops_per_j


def _energy_run(folder: Path, power_bias: float) -> Path:
    """A run folder whose GEMM part carries an energy record measured on the fake NVML."""
    from deepbench.kernels.catalog import by_id

    from .reports_synthetic import result, write_run

    clock = FakeTime()
    gpu = FakeGpu(clock, chunk_s=0.001)
    energy = measure_energy(
        gpu.start, 100, 0.001, gpu_meter(clock, power_bias=power_bias), 0.5, now=clock, drain=gpu.drain
    )
    kernel = by_id()["gemm/train/000"]
    r = result(kernel, "fp16", lambda d: [10.0, 10.1, 9.9])
    part = r.parts[0]
    rated = part.measurement.model_copy(update={"energy": energy.rated(part.flops, part.min_bytes)})
    r = r.model_copy(update={"parts": (part.model_copy(update={"measurement": rated}),)})
    return write_run(folder, [r])


def test_energy_vs_power_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from .conftest import load_benchmark

    script = load_benchmark("energy_vs_power")
    agreeing = _energy_run(tmp_path / "a", 1.0)
    assert script.main([str(agreeing), "--min-window", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "gemm/train/000/fp16/fwd" in out and "SUMMARY: 1 of 1 parts" in out
    assert script.main([str(agreeing)]) == 1  # no part's window lasted a second
    off = _energy_run(tmp_path / "b", 1.08)
    assert script.main([str(off), "--min-window", "0.5"]) == 1
    assert "SUMMARY: 0 of 1 parts" in capsys.readouterr().out
    assert script.main([str(tmp_path / "missing")]) == 2


def test_compare_sets_energy_beside_time(tmp_path: Path) -> None:
    """Two runs with energy records: compare's notes give the energy-per-call ratio beside the time's."""
    from deepbench.runner.analysis.compare import compare
    from deepbench.runner.analysis.like_for_like import notes
    from deepbench.runner.analysis.sources import load_run

    base = load_run(_energy_run(tmp_path / "a", 1.0))
    other = load_run(_energy_run(tmp_path / "b", 1.0))
    assert base.entries[0].extra["joules_per_call"] > 0
    said = notes(compare([base, other]))
    assert any("energy per call 1.000x the baseline's (geomean of 1 kernels" in line for line in said)


class _SteadyPackage:
    """A RAPL-like counter on the real clock: 15 W, updated every millisecond."""

    name = "rapl-package"
    power_reading = ""

    def energy_j(self) -> float:
        import time

        return int(time.perf_counter() * 1000) / 1000 * 15.0

    def power_w(self) -> None:
        return None

    def power_limit_w(self) -> None:
        return None

    def state(self) -> PowerState:
        return PowerState()


def test_cpu_part_energy_on_a_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU backends' --energy (energy.with_cpu_energy): sample-sized chunks of real calls run
    back to back against a counter; without a meter, the reason goes into the part's info."""
    m = Measurement.of(
        [50.0, 51.0, 49.0],
        method="cpu-perf-counter",
        calls_per_sample=20,
        warmup_calls=0,
        stop_reason="converged",
        target_rel_precision=0.01,
    )
    x = np.ones((64, 64))
    monkeypatch.setattr(energy_mod, "machine_meter", _SteadyPackage)
    info: dict = {}
    got = energy_mod.with_cpu_energy(m, lambda: x @ x, info, 0.2)
    assert got.energy is not None and not info and got.energy.watts == pytest.approx(15.0, rel=0.02)
    assert got.energy.calls % 20 == 0 and got.energy.window_s >= 0.2 and got.stats == m.stats
    monkeypatch.setattr(energy_mod, "machine_meter", lambda: "no meter here")
    assert energy_mod.with_cpu_energy(m, lambda: None, info, 0.2).energy is None and info == {
        "energy_error": "no meter here"
    }
