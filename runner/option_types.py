"""Numeric command-line options checked at the door: argparse `type=` converters that accept only
finite numbers within a stated range, so `--time-cap inf`, `--kernel-timeout nan`, `--threads
100000` or a seed beyond 64 bits are one line and exit status 2 (argparse's error), never a
value that fails deep inside a run."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask: what a container or taskset allows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def real(
    low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False
) -> Callable[[str], float]:
    """A finite float within [low, high] (open ends where asked)."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
        if low is not None and (value < low or (low_open and value == low)):
            raise argparse.ArgumentTypeError(f"must be {'above' if low_open else 'at least'} {low:g}, not {text}")
        if high is not None and (value > high or (high_open and value == high)):
            raise argparse.ArgumentTypeError(f"must be {'below' if high_open else 'at most'} {high:g}, not {text}")
        return value

    convert.__name__ = "number"
    return convert


def integer(
    low: int | None = None, high: int | Callable[[], int] | None = None, why_high: str = ""
) -> Callable[[str], int]:
    """An integer within [low, high]; `high` may be computed when the option is read (usable CPUs)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        top = high() if callable(high) else high
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {text}")
        if top is not None and value > top:
            raise argparse.ArgumentTypeError(f"must be at most {top}{why_high}, not {text}")
        return value

    convert.__name__ = "integer"
    return convert


def ranged(field: str) -> Callable[[str], float]:
    """A number within the range of the Settings field `field` (setting_ranges.RANGES, which the
    checker and verify apply to a bundle too)."""
    from .setting_ranges import RANGES

    bound = RANGES[field]
    return real(bound.low, bound.high, low_open=bound.low_open)
