"""How each kernel is measured, as the command line asks: the measurement option group, those options
parsed once into a frozen `Measurement`, and the plan's `Settings` made from it (with the mode's preset,
modes.py). A contradiction among them (a time cap no shorter than the kernel timeout, clocks locked on a
CPU) is one line when the request is made, before anything is written or started."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from deepbench.kernels.padding import PadMode
from deepbench.kernels.results import INPUT_DISTRIBUTIONS, MAX_SEED, InputDistribution, MeasureMode, Padding, Settings

from ...errors import UserError
from ...option_types import integer, ranged, usable_cpus
from ...platforms import Platform
from ...setting_ranges import MAX_LOCK_MHZ, RANGES
from .modes import MODES, Preset

DEFAULT_MODE: MeasureMode = "default"
DEFAULT_KERNEL_TIMEOUT_S = 600.0
DEFAULT_SEED = 0
LOCK_MAX: Literal["max"] = "max"


def lock_clocks(value: str) -> int | Literal["max"]:
    """--lock-clocks: 'max' or a clock in MHz."""
    if value == LOCK_MAX:
        return LOCK_MAX
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r}: give max, or the SM clock in MHz")
    return integer(1, MAX_LOCK_MHZ)(value)


def add_measurement_arguments(parser: argparse.ArgumentParser) -> None:
    m = parser.add_argument_group("measurement")
    _add_mode_arguments(m)
    _add_sampling_arguments(m)
    _add_input_arguments(m)
    _add_gpu_arguments(m)
    parser.set_defaults(mode=DEFAULT_MODE)


def _add_mode_arguments(m: argparse._ArgumentGroup) -> None:
    mode = m.add_mutually_exclusive_group()
    mode.add_argument(
        "--fast",
        dest="mode",
        action="store_const",
        const="fast",
        help="5%% precision, 0.2 s cap per direction, no minimum time (default: 1%% precision, "
        "at least 0.2 s of samples, 1 s under the GPU's power limiter, 1 s cap)",
    )
    mode.add_argument(
        "--rigorous",
        dest="mode",
        action="store_const",
        const="rigorous",
        help="0.5%% precision, 20+ samples, at least 1 s of samples, 10 s cap per direction",
    )


def _add_sampling_arguments(m: argparse._ArgumentGroup) -> None:
    m.add_argument(
        "--time-cap", type=ranged("time_cap_s"), metavar="S", help="seconds per direction before giving up on precision"
    )
    m.add_argument(
        "--min-sample",
        type=ranged("min_sample_s"),
        metavar="S",
        help="calls per sample until a sample lasts at least this long (default 0.001; a collective's "
        "back-to-back calls overlap as in nccl-tests' 100-call launches only in longer samples)",
    )
    m.add_argument(
        "--warm-up",
        type=ranged("warm_up_s"),
        metavar="S",
        help="GPU: at most this long, a large GEMM before the first kernel until the temperature settles "
        "(default 30, --rigorous 120, --fast 0; 0 skips it)",
    )
    m.add_argument(
        "--target",
        type=ranged("target_rel_precision"),
        metavar="REL",
        help="relative precision of the median to reach (0.01 = 1%%)",
    )
    m.add_argument(
        "--kernel-timeout",
        type=ranged("kernel_timeout_s"),
        default=DEFAULT_KERNEL_TIMEOUT_S,
        metavar="S",
        help=f"kill and record as timeout a kernel running longer than this (default {DEFAULT_KERNEL_TIMEOUT_S:g})",
    )
    m.add_argument(
        "--threads",
        type=integer(1, usable_cpus, " (the CPUs this process may use)"),
        metavar="N",
        help="CPU threads (default: all)",
    )


def _add_input_arguments(m: argparse._ArgumentGroup) -> None:
    m.add_argument(
        "--seed",
        type=integer(int(RANGES["seed"].low), int(RANGES["seed"].high)),
        default=DEFAULT_SEED,
        help=f"seed of the random inputs, 0 to {MAX_SEED} (default {DEFAULT_SEED})",
    )
    m.add_argument("--cold", action="store_true", help="GPU: flush the L2 cache before every call")
    m.add_argument(
        "--verify-timing", action="store_true", help="GPU: cross-check each time with the profiler's kernel durations"
    )
    m.add_argument(
        "--pad",
        choices=[p.value for p in PadMode],
        default=PadMode.DEEPBENCH.value,
        help="the problem handed to the library: deepbench (default) pads as DeepBench did (tensor-core "
        "GEMMs to multiples of 8 by layout, int8 GEMM m to 4, half convolution channels to 8, int8 "
        "ones to 4 then 32); none runs the listed shape; both measures the padded shape and the raw "
        "one beside it (the alignment penalty, raw over padded)",
    )
    m.add_argument(
        "--kernel-time",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="GPU: time calls under 20 us by their kernels' own durations (CUPTI), without the GPU's "
        "0.1-0.3 us between two dependent kernels that back-to-back calls pay (default); "
        "--no-kernel-time times them by events of back-to-back graph replays, as a native loop "
        "would, and starts no CUPTI (unless --verify-timing)",
    )
    m.add_argument(
        "--inputs",
        choices=INPUT_DISTRIBUTIONS,
        default=Settings.model_fields["inputs"].default,
        help="what the operands are drawn from: normal (default), uniform [0, 1), zeros, or deepbench "
        "(what DeepBench's binaries drew: zeros for half and int8, uniform [0, 1) for float); "
        "zeros draw less power, so a GPU holds a higher clock. Recorded in every result",
    )


def _add_gpu_arguments(m: argparse._ArgumentGroup) -> None:
    m.add_argument(
        "--energy",
        action="store_true",
        help="after each part's time, read the energy meter around a loop of its calls (NVML's counter "
        "on NVIDIA, RAPL or a Raspberry Pi 5's PMIC on a CPU): joules per call, watts, GFLOP/J",
    )
    m.add_argument(
        "--energy-window",
        type=ranged("energy_window_s"),
        metavar="S",
        default=Settings.model_fields["energy_window_s"].default,
        help="--energy: read the meter over at least this long per part (default %(default)s; at least "
        "10 of the meter's updates in any case)",
    )
    m.add_argument(
        "--lock-clocks",
        type=lock_clocks,
        metavar="max|MHZ",
        help="GPU: ask NVML to lock the SM clock for the run (max: the highest supported), restored at "
        "the end; needs root, and the run records whether it was granted",
    )


@dataclass(frozen=True)
class Measurement:
    """The measurement options as asked (None: the mode's preset). Field names are the options' dests,
    so that --resume compares what the command line named with what the plan holds by one name."""

    mode: MeasureMode
    time_cap: float | None
    min_sample: float | None
    warm_up: float | None
    target: float | None
    kernel_timeout: float
    threads: int | None
    seed: int
    cold: bool
    verify_timing: bool
    pad: Padding
    kernel_time: bool
    inputs: InputDistribution
    energy: bool
    energy_window: float
    lock_clocks: int | Literal["max"] | None

    def __post_init__(self) -> None:
        cap = self.preset()["time_cap_s"]
        if cap >= self.kernel_timeout:
            raise UserError(
                f"--time-cap ({cap:g} s per direction) must be shorter than --kernel-timeout "
                f"({self.kernel_timeout:g} s), or every kernel would be killed as a timeout"
            )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Measurement:
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def preset(self) -> Preset:
        """The mode's preset with what the command line sets over it."""
        preset = MODES[self.mode].copy()
        for key, value in (
            ("time_cap_s", self.time_cap),
            ("target_rel_precision", self.target),
            ("warm_up_s", self.warm_up),
            ("min_sample_s", self.min_sample),
        ):
            if value is not None:
                preset[key] = value  # type: ignore[literal-required]
        return preset

    def check_platform(self, platform: Platform) -> None:
        """What cannot be asked of this platform's device."""
        if self.lock_clocks is not None and platform.device == "cpu":
            raise UserError("--lock-clocks locks a GPU's clocks (NVML): this run is on a CPU")

    def settings(self, platform: Platform, backend_options: Mapping[str, dict[str, Any]], ranks: int) -> Settings:
        """The plan's settings: these, on `platform`'s device, with the backends' options as stored."""
        self.check_platform(platform)
        return Settings(
            mode=self.mode,
            threads=self.threads,
            seed=self.seed,
            device=platform.device,
            cold=self.cold,
            verify_timing=self.verify_timing,
            kernel_time=self.kernel_time,
            kernel_timeout_s=self.kernel_timeout,
            pad=self.pad,
            backend_options=dict(backend_options),
            ranks=ranks,
            inputs=self.inputs,
            energy=self.energy,
            energy_window_s=self.energy_window,
            lock_clocks=self.lock_clocks,
            **self.preset(),
        )
