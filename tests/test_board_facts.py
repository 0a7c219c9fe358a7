"""Board facts and emulation detection (kernels/backends/cpu/board.py, throttling.py) on recorded
/proc and /sys trees of a Raspberry Pi 4 and a Pi 5 (tests/fixtures/boards), and on this
machine: an emulated run must never pass for hardware, and a throttled Pi flags its results."""

from __future__ import annotations

import platform
import shutil
from pathlib import Path

import pytest

from deepbench.kernels.backends.contract.base import TimedPart
from deepbench.kernels.backends.cpu import board, throttling
from deepbench.kernels.catalog import by_id
from deepbench.kernels.harness.execute import finish
from deepbench.kernels.precision import PRECISIONS, Precision
from deepbench.kernels.results import Check, PartResult, utcnow
from deepbench.kernels.timing import cpu as cpu_timer
from deepbench.kernels.timing.stopping import StopRule

BOARDS = Path(__file__).parent / "fixtures" / "boards"

X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu vme de pse tsc msr pae sse sse2 avx avx2
"""
PI4_CPUINFO = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd08
CPU revision\t: 3

Hardware\t: BCM2835
Model\t\t: Raspberry Pi 4 Model B Rev 1.4
"""


def test_arm_process_on_x86_kernel_is_emulated() -> None:
    emu = board.emulation(machine="aarch64", cpuinfo=X86_CPUINFO, kernel_arch="x86_64")
    assert emu["emulated"] is True
    assert len(emu["evidence"]) == 2  # both signals agree
    assert "emulated" in board.emulation_warning(emu)


def test_either_signal_alone_marks_emulation() -> None:
    # An old kernel without /proc/sys/kernel/arch: cpuinfo still tells.
    assert board.emulation(machine="aarch64", cpuinfo=X86_CPUINFO, kernel_arch=None)["emulated"]
    # A qemu that fakes /proc/cpuinfo (newer qemu-user does for arm): the kernel's arch still tells.
    assert board.emulation(machine="aarch64", cpuinfo=PI4_CPUINFO, kernel_arch="x86_64")["emulated"]


def test_real_pi_and_real_x86_are_not_emulated() -> None:
    assert not board.emulation(machine="aarch64", cpuinfo=PI4_CPUINFO, kernel_arch="aarch64")["emulated"]
    assert not board.emulation(machine="x86_64", cpuinfo=X86_CPUINFO, kernel_arch="x86_64")["emulated"]
    assert board.emulation_warning({"emulated": False}) is None


def test_this_machine_is_what_it_says() -> None:
    """Natively here (the tests run on the host): not emulated, and the facts are complete."""
    facts = board.cpu_facts()
    assert facts["machine"] == platform.machine()
    assert facts["emulated"] is False, facts["emulation"]
    assert facts["logical_cpus"] >= 1 and facts["memory_gib"] > 0
    assert {"clocks_mhz", "temperature_c"} <= set(facts["before"])


def test_board_model_from_cpuinfo_where_the_device_tree_is_masked(tmp_path: Path) -> None:
    assert board.board_model(PI4_CPUINFO, root=tmp_path) == "Raspberry Pi 4 Model B Rev 1.4"
    assert board.board_model(X86_CPUINFO, root=tmp_path) is None


def test_facts_after_carries_the_warnings() -> None:
    before = board.cpu_facts()
    before["emulation"] = board.emulation(machine="aarch64", cpuinfo=X86_CPUINFO, kernel_arch="x86_64")
    after = board.facts_after(before)
    assert after["throttled_during_run"] is False
    assert any("emulated" in w for w in after["warnings"])


def test_report_headline_says_emulated() -> None:
    from deepbench.runner.analysis.sources import Source
    from deepbench.runner.render.report_render import headline

    specs = {"device.name": "Intel(R) Xeon(R) Processor", "device.emulated": "True", "device.machine": "aarch64"}
    line = headline(Source(label="r", kind="run", entries=(), specs=specs, ceilings={}, set=None, path=""))
    assert "EMULATED aarch64" in line
    specs["device.emulated"] = "False"
    assert "EMULATED" not in headline(
        Source(label="r", kind="run", entries=(), specs=specs, ceilings={}, set=None, path="")
    )


def test_emulated_arm_container_gets_an_arm_cpuinfo(tmp_path) -> None:
    """onnxruntime's ARM build cannot start on the host's x86 /proc/cpuinfo under qemu-user: the
    runner mounts an ARMv8 one for emulated runs only (runner/launch/images/emulation.py)."""
    from deepbench.runner.launch.images.container import run_options
    from deepbench.runner.launch.images.emulation import CPUINFO_ENV, is_emulated
    from deepbench.runner.platforms import get_platform

    arm, cpu = get_platform("arm"), get_platform("cpu")
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    opts = run_options(arm, "img", plan, tmp_path)
    mounted = {v["bind"]: k for k, v in opts["volumes"].items()}
    if is_emulated(arm):  # this x86 host
        assert platform.machine() == "x86_64"
        text = Path(mounted["/proc/cpuinfo"]).read_text()
        assert board.cpuinfo_family(text) == "arm" and CPUINFO_ENV in opts["environment"]
    else:  # a real ARM board: nothing substituted
        assert "/proc/cpuinfo" not in mounted
    assert "/proc/cpuinfo" not in {v["bind"] for v in run_options(cpu, "img", plan, tmp_path)["volumes"].values()}


# ----- recorded Raspberry Pi trees -----------------------------------------------------------------
@pytest.fixture
def pi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A copy of a recorded board tree, its vcgencmd (if it has one) first on PATH."""

    def make(name: str) -> Path:
        root = tmp_path / name
        shutil.copytree(BOARDS / name, root, symlinks=True)
        monkeypatch.setenv("PATH", f"{root / 'bin'}:/usr/bin:/bin")
        return root

    return make


def test_pi4_facts(pi) -> None:
    root = pi("pi4")
    facts = board.cpu_facts(root, machine="aarch64")
    assert facts["board"] == "Raspberry Pi 4 Model B Rev 1.4" and facts["soc"] == "BCM2711"
    assert facts["revision"] == {"code": "c03114", "soc": "BCM2711", "memory_mb": 4096, "board_revision": "1.4"}
    assert facts["emulated"] is False and facts["memory_gib"] == pytest.approx(3.7, abs=0.05)
    assert facts["cores"] == {"count": 4, "types": ["Cortex-A72"]}
    assert facts["clusters"] == [
        {"policy": "policy0", "cpus": [0, 1, 2, 3], "core": ["Cortex-A72"], "min_mhz": 600.0, "max_mhz": 1800.0}
    ]
    before = facts["before"]
    assert before["clocks_mhz"]["policy0"] == {
        "governor": "ondemand",
        "cur_mhz": 1800.0,
        "allowed_max_mhz": 1800.0,
        "max_mhz": 1800.0,
    }
    assert before["temperature_c"] == {"thermal_zone0:cpu-thermal": pytest.approx(47.712)}
    assert before["throttled"]["source"] == "vcgencmd get_throttled"
    assert before["throttled"]["now"] == [] and before["throttled"]["since_boot"] == []


def test_pi5_facts_without_vcgencmd_read_sysfs(pi) -> None:
    root = pi("pi5")
    facts = board.cpu_facts(root, machine="aarch64")
    assert facts["board"] == "Raspberry Pi 5 Model B Rev 1.0" and facts["soc"] == "BCM2712"
    assert facts["revision"]["memory_mb"] == 8192 and facts["revision"]["soc"] == "BCM2712"
    assert facts["clusters"][0]["core"] == ["Cortex-A76"] and facts["clusters"][0]["max_mhz"] == 2400.0
    throttled = facts["before"]["throttled"]
    assert throttled["source"].startswith("sysfs") and throttled["now"] == []


def test_soc_from_the_revision_code_where_the_device_tree_is_masked(pi) -> None:
    root = pi("pi5")
    shutil.rmtree(root / "proc" / "device-tree")  # Docker masks /sys/firmware and with it /proc/device-tree
    facts = board.cpu_facts(root, machine="aarch64")
    assert facts["board"] == "Raspberry Pi 5 Model B Rev 1.0" and facts["soc"] == "BCM2712"


def test_big_little_clusters(tmp_path: Path) -> None:
    """One cpufreq policy per cluster, each core named from its part (an RK3588's 4 Cortex-A55 at
    1.8 GHz and two pairs of Cortex-A76 at 2.4 GHz)."""
    cores = [("0xd05", range(4)), ("0xd0b", range(4, 8))]
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(
        "".join(
            f"processor\t: {i}\nCPU implementer\t: 0x41\nCPU part\t: {part}\n\n" for part, cpus in cores for i in cpus
        )
    )
    for policy, cpus, top in (("policy0", "0-3", 1800000), ("policy4", "4-5", 2400000), ("policy6", "6-7", 2400000)):
        d = tmp_path / "sys/devices/system/cpu/cpufreq" / policy
        d.mkdir(parents=True)
        for key, val in (("related_cpus", cpus), ("cpuinfo_max_freq", top), ("scaling_governor", "schedutil")):
            (d / key).write_text(f"{val}\n")
    cpuinfo = (tmp_path / "proc/cpuinfo").read_text()
    got = [(c["policy"], c["cpus"], c["core"], c["max_mhz"]) for c in board.clusters(tmp_path, cpuinfo)]
    assert got == [
        ("policy0", [0, 1, 2, 3], ["Cortex-A55"], 1800.0),
        ("policy4", [4, 5], ["Cortex-A76"], 2400.0),
        ("policy6", [6, 7], ["Cortex-A76"], 2400.0),
    ]


def _part() -> TimedPart:
    return TimedPart("fwd", lambda: None, lambda: None, 1.0, 1.0)  # type: ignore[arg-type, return-value]


def test_a_pi_that_throttles_during_the_run_flags_the_kernel_and_the_run(pi) -> None:
    root = pi("pi4")
    monitor = board.BoardMonitor(root, machine="aarch64")
    quiet, hot = _part(), _part()
    monitor.mark(quiet.info)
    assert "board_throttled" not in quiet.info
    (root / "bin" / "get_throttled.value").write_text("0x50005\n")  # under-voltage and throttled, now and since boot
    monitor.mark(hot.info)
    assert hot.info["board_throttled"]["flags"] == [
        "throttled",
        "throttled occurred",
        "under-voltage",
        "under-voltage occurred",
    ]
    # the harness turns it into the kernel's `throttled` flag, as for a GPU under its power limit
    assert "throttled" in _flags(hot) and "throttled" not in _flags(quiet)
    after = monitor.after()
    assert after["throttled_during_run"] is True and after["throttled_at_start"] is False
    assert any("throttled during the run" in w and "vcgencmd" in w for w in after["warnings"])


def _flags(part: TimedPart) -> tuple[str, ...]:
    """The flags the harness gives a kernel with this one part (measured for real, checked)."""
    measured = cpu_timer.measure(lambda: None, StopRule(0.5, 3, 5, 0.01), 1e-4)
    check = Check(passed=True, method="exact", error=0.0, tolerance=0.0)
    result = PartResult(
        direction="fwd",
        measurement=measured,
        flops=1.0,
        min_bytes=1.0,
        check=check,
        tflops=None,
        gbps=1.0,
        info=part.info,
    )
    kernel = by_id()["gemm/inference_device/003"]
    base = dict(
        id="x", kernel=kernel, precision=PRECISIONS[Precision.FP32], backend="tflite", library={}, started_at=utcnow()
    )
    return finish(base, [result], {}, {}).flags


def test_a_pi_throttled_from_the_start_flags_every_kernel_and_the_run(pi) -> None:
    root = pi("pi5")
    (root / "sys/class/thermal/thermal_zone0/temp").write_text("85312\n")  # above the firmware's 80 C
    (root / "sys/class/hwmon/hwmon0/in0_lcrit_alarm").write_text("1\n")
    monitor = board.BoardMonitor(root, machine="aarch64")
    assert monitor.facts["before"]["throttled"]["now"] == ["under-voltage", "throttled"]
    part = _part()
    monitor.mark(part.info)
    assert part.info["board_throttled"]["flags"] == ["throttled", "under-voltage"]
    assert part.info["throttled_samples_kept"] is True
    after = monitor.after()
    assert after["throttled_at_start"] is True
    assert any("at its start: under-voltage, throttled" in w for w in after["warnings"])


def test_a_capped_clock_and_a_passive_trip_point_read_as_throttled(pi) -> None:
    root = pi("pi5")
    policy = root / "sys/devices/system/cpu/cpufreq/policy0"
    (policy / "scaling_max_freq").write_text("1500000\n")
    zone = root / "sys/class/thermal/thermal_zone0"
    (zone / "trip_point_0_type").write_text("passive\n")
    (zone / "trip_point_0_temp").write_text("50000\n")
    state = throttling.from_sysfs(root, raspberry_pi=False)
    assert state["now"] == ["arm frequency capped", "throttled"]
    assert state["evidence"] == ["policy0 max 1500 of 2400 MHz", "thermal_zone0 52.1 C >= 50.0 C"]


def test_emulated_runs_do_not_watch_the_hosts_throttling(pi) -> None:
    root = pi("pi4")
    (root / "bin" / "get_throttled.value").write_text("0x50005\n")
    monitor = board.BoardMonitor(root, machine="x86_64")  # an arm64 tree read by an x86 process: emulation-like
    assert monitor.facts["emulated"] is True and "throttled" not in monitor.facts["before"]
    part = _part()
    monitor.mark(part.info)
    assert "board_throttled" not in part.info
    assert monitor.after()["throttled_during_run"] is False


def test_a_vcgencmd_that_cannot_reach_the_firmware_falls_back_to_sysfs(pi) -> None:
    root = pi("pi4")
    (root / "bin" / "vcgencmd").write_text("#!/bin/sh\necho 'VCHI initialization failed'\n")
    state = throttling.state(root, raspberry_pi=True)
    assert state["source"].startswith("sysfs") and "VCHI" in state["vcgencmd_error"] and state["now"] == []


def test_firmware_bits_decode() -> None:
    assert throttling.decode(0x50005) == {
        "value": 0x50005,
        "now": ["under-voltage", "throttled"],
        "since_boot": ["under-voltage", "throttled"],
    }
    assert throttling.new_flags({"since_boot": ["under-voltage"]}, {"now": [], "since_boot": ["under-voltage"]}) == []
