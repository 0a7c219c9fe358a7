"""--lock-clocks: ask NVML to hold the SM clock at one value for the whole run, and always give
the clocks back.

Two cards of one model disagree through their clocks (the power limiter holds each where its own
silicon allows); a locked clock takes that out where the driver allows it. Locking needs
administrator rights (NVML_ERROR_NO_PERMISSION otherwise) and a GPU that supports it (Volta and
newer; NVML_ERROR_NOT_SUPPORTED otherwise): the run records what was asked, whether it was granted,
and why not. A locked clock is still a ceiling: the power limiter and thermal slowdowns can pull
the clock below it, which the per-sample clock readings show.

The lock outlives the process on the GPU, so it is released (nvmlDeviceResetGpuLockedClocks) in
every way the harness ends: `release` from the backend's close, a `with` block's exit, at
interpreter exit (atexit), and on SIGTERM, SIGHUP and SIGINT before the harness's own handlers run.
Only a SIGKILL leaves it locked; the record then says `restored: false`, and `nvidia-smi -rgc`
resets it by hand."""

from __future__ import annotations

import atexit
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

from .clocks import ClockReader

RELEASE_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# NVML's return codes (nvmlReturn_t) a refusal names
WHY = {
    3: "NVML_ERROR_NOT_SUPPORTED: this GPU or driver cannot lock its clocks",
    4: "NVML_ERROR_NO_PERMISSION: locking clocks needs administrator rights (root, or a container run "
    "with the SYS_ADMIN capability)",
}


def _why(exc: Exception) -> str:
    code = getattr(exc, "value", None)
    return WHY.get(code, f"{type(exc).__name__}: {exc}") if isinstance(code, int) else f"{type(exc).__name__}: {exc}"


def highest_clock(clocks: ClockReader) -> int:
    """The highest SM clock the GPU supports at its highest memory clock (nvmlDeviceGetSupported*Clocks),
    else its maximum SM clock (nvmlDeviceGetMaxClockInfo)."""
    n, h = clocks.nvml, clocks.handle
    try:
        memory = max(n.nvmlDeviceGetSupportedMemoryClocks(h))
        return int(max(n.nvmlDeviceGetSupportedGraphicsClocks(h, memory)))
    except Exception:  # noqa: BLE001 - a GPU without the list still has a maximum
        return int(n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM))


class ClockLock:
    """One run's request for locked SM clocks: `record` says what was asked and what happened."""

    def __init__(
        self, clocks: ClockReader, asked: int | str, on_exit: Callable[[Callable[[], None]], Any] = atexit.register
    ) -> None:
        self.clocks = clocks
        self.record: dict[str, Any] = {"asked": asked, "granted": False}
        self.locked = False
        self._previous: dict[int, Any] = {}
        if not clocks.available:
            self.record["reason"] = "NVML is not available (nvidia-ml-py not installed, or no device handle)"
            return
        try:
            mhz = highest_clock(clocks) if asked == "max" else int(asked)
            self.record["mhz"] = mhz
            clocks.nvml.nvmlDeviceSetGpuLockedClocks(clocks.handle, mhz, mhz)
        except Exception as exc:  # noqa: BLE001 - a refusal is recorded, the run goes on unlocked
            self.record["reason"] = _why(exc)
            return
        self.locked = True
        self.record["granted"] = True
        on_exit(self.release)
        self._chain_signals()

    def _chain_signals(self) -> None:
        for sig in RELEASE_SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread: atexit and close still release
                return

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum)
        self.release()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    def release(self) -> None:
        """Give the clocks back (once); the record says whether NVML did."""
        if not self.locked:
            return
        self.locked = False
        try:
            self.clocks.nvml.nvmlDeviceResetGpuLockedClocks(self.clocks.handle)
            self.record["restored"] = True
        except Exception as exc:  # noqa: BLE001 - said in the record: reset by hand with nvidia-smi -rgc
            self.record["restored"] = False
            self.record["restore_error"] = _why(exc)
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}

    def __enter__(self) -> ClockLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
