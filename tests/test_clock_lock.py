"""--lock-clocks (kernels/timing/clock_lock.py) on a fake pynvml: the highest supported clock or
the MHz asked, granted or refused with NVML's reason, and the clocks always given back (release,
a with block, interpreter exit, a signal before the harness's own handler)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from deepbench.kernels.timing.clock_lock import ClockLock
from deepbench.kernels.timing.clocks import ClockReader

from .conftest import run_cli
from .fake_nvml import NVML_ERROR_NO_PERMISSION, NVML_ERROR_NOT_SUPPORTED, FakeNvml, FakeTime


def lock(asked: int | str, **kw) -> tuple[ClockLock, FakeNvml, list[Callable[[], None]]]:
    nvml = FakeNvml(FakeTime(), **kw)
    at_exit: list[Callable[[], None]] = []
    return ClockLock(ClockReader.of(nvml, "handle-0"), asked, on_exit=at_exit.append), nvml, at_exit


def test_max_is_granted_and_given_back_once() -> None:
    held, nvml, at_exit = lock("max")
    try:
        assert held.record == {"asked": "max", "granted": True, "mhz": 1980} and nvml.locked == (1980, 1980)
        assert ClockReader.of(nvml, "handle-0").sm_mhz() == 1980
    finally:
        held.release()
    assert nvml.locked is None and held.record["restored"] is True
    at_exit[0]()  # interpreter exit after the backend's close: nothing more to do
    assert nvml.calls == ["lock 1980 1980", "reset"]


def test_given_mhz_with_a_block() -> None:
    held, nvml, _ = lock(1500)
    with held:
        assert nvml.locked == (1500, 1500)
    assert nvml.calls == ["lock 1500 1500", "reset"]


@pytest.mark.parametrize(
    ("error", "said"),
    [(NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION"), (NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED")],
)
def test_refusal_is_recorded_and_nothing_is_reset(error: int, said: str) -> None:
    held, nvml, at_exit = lock("max", lock_error=error)
    assert held.record["granted"] is False and said in held.record["reason"] and not at_exit
    held.release()
    assert nvml.calls == ["lock 1980 1980"]


def test_without_nvml_says_why() -> None:
    held = ClockLock(ClockReader.of(None, None), "max")
    assert held.record["granted"] is False and "NVML is not available" in held.record["reason"]


def test_a_signal_gives_the_clocks_back_before_the_harness_handler() -> None:
    seen: list[int] = []
    original = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        held, nvml, _ = lock("max")
        os.kill(os.getpid(), signal.SIGTERM)
        assert nvml.locked is None and held.record["restored"] is True and seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is not held._on_signal  # the harness's handler is back
    finally:
        signal.signal(signal.SIGTERM, original)


def test_cpu_run_refuses_the_option(tmp_path) -> None:
    proc = run_cli("deepbench-run", "--local", "--suite", "smoke", "--lock-clocks", "max", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "--lock-clocks locks a GPU's clocks" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "x").exists()
    bad = run_cli("deepbench-run", "--local", "--suite", "smoke", "--lock-clocks", "fast")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
