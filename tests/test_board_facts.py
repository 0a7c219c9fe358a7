"""Board facts and emulation detection (kernels/backends/board.py) on recorded /proc texts, and
on this machine: an emulated run must never pass for hardware."""

from __future__ import annotations

import platform

from deepbench.kernels.backends import board

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


def test_board_model_from_cpuinfo_where_the_device_tree_is_masked() -> None:
    if not board.DEVICE_TREE_MODEL.exists():
        assert board.board_model(PI4_CPUINFO) == "Raspberry Pi 4 Model B Rev 1.4"
    assert board.board_model(X86_CPUINFO) in (None, board._read(board.DEVICE_TREE_MODEL))


def test_throttling_during_the_run_warns() -> None:
    before = {"throttled": {"flags": ["under-voltage occurred"]}}
    after = {"throttled": {"flags": ["under-voltage occurred", "throttled", "throttling occurred"]}}
    warning = board.throttle_warning(before, after)
    assert warning and "throttling occurred" in warning and "under-voltage" not in warning
    assert board.throttle_warning(after, after) is None
    assert board.throttle_warning({}, {}) is None  # no vcgencmd: nothing to say


def test_facts_after_carries_the_warnings() -> None:
    before = board.cpu_facts()
    before["emulation"] = board.emulation(machine="aarch64", cpuinfo=X86_CPUINFO, kernel_arch="x86_64")
    after = board.facts_after(before)
    assert after["throttled_during_run"] is False
    assert any("emulated" in w for w in after["warnings"])


def test_report_headline_says_emulated() -> None:
    from deepbench.runner.report_render import headline
    from deepbench.runner.sources import Source

    specs = {"device.name": "Intel(R) Xeon(R) Processor", "device.emulated": "True", "device.machine": "aarch64"}
    line = headline(Source(label="r", kind="run", entries=(), specs=specs, ceilings={}, set=None, path=""))
    assert "EMULATED aarch64" in line
    specs["device.emulated"] = "False"
    assert "EMULATED" not in headline(Source(label="r", kind="run", entries=(), specs=specs, ceilings={}, set=None,
                                             path=""))


def test_emulated_arm_container_gets_an_arm_cpuinfo(tmp_path) -> None:
    """onnxruntime's ARM build cannot start on the host's x86 /proc/cpuinfo under qemu-user: the
    runner mounts an ARMv8 one for emulated runs only (runner/emulation.py)."""
    from deepbench.runner.container import run_options
    from deepbench.runner.emulation import CPUINFO_ENV, is_emulated
    from deepbench.runner.platforms import get_platform

    arm, cpu = get_platform("arm"), get_platform("cpu")
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    opts = run_options(arm, "img", plan, tmp_path)
    mounted = {v["bind"]: k for k, v in opts["volumes"].items()}
    if is_emulated(arm):  # this x86 host
        assert platform.machine() == "x86_64"
        text = open(mounted["/proc/cpuinfo"]).read()
        assert board.cpuinfo_family(text) == "arm" and CPUINFO_ENV in opts["environment"]
    else:  # a real ARM board: nothing substituted
        assert "/proc/cpuinfo" not in mounted
    assert "/proc/cpuinfo" not in {v["bind"] for v in run_options(cpu, "img", plan, tmp_path)["volumes"].values()}
