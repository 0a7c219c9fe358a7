"""How long to measure a GPU kernel so a second run agrees: candidate rules replayed offline on
series recorded by settle_probe.py (no GPU needed).

Each recorded series is one kernel's samples (us per call, in time order) for a few seconds,
taken once after 0.5 s of a large GEMM and once after 0.5 s idle. A rule here is the harness's
own stopping loop (kernels/timing/clocked.py run_samples with StopRule at the default mode's 1%
target and 1 s cap) with a minimum measuring time, applied after ignoring the first `settle`
seconds, or from the clock's first move (kernels/timing/settling.py, what the harness does). Per rule
it prints how far the figures from the two histories are apart, kernel by kernel, and how long
the measurement took: the rule the default mode uses should agree within 3% for all of them at
the least cost.

    python tests/benchmarks/settle_rules.py [tests/benchmarks/results/settle-h100.json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from deepbench.kernels.timing.clocked import run_samples
from deepbench.kernels.timing.sampler import Sampler
from deepbench.kernels.timing.settling import ClockReading
from deepbench.kernels.timing.stopping import StopRule
from deepbench.runner.launch.modes import MODES

DEFAULT = Path(__file__).resolve().parent / "results" / "settle-h100.json"
SETTLE_S = (0.0, 0.1, 0.2, 0.3)
MIN_TIME_S = (0.05, 0.1, 0.2, 0.3, 0.5)
AGREEMENT = 0.03
TARGET, MIN_SAMPLES, MAX_SAMPLES, TIME_CAP_S = (MODES["default"][k] for k in (
    "target_rel_precision", "min_samples", "max_samples", "time_cap_s"))


def figure(series: list[list[float]], settle_s: float, min_time_s: float, follow_clock: bool = False,
           limited_min_time_s: float = 0.0) -> tuple[float, float]:
    """(median of the samples the harness's stopping loop kept, seconds from the series' start
    when it stopped), replaying the series through kernels/timing/clocked.py run_samples after
    ignoring the first `settle_s` seconds. With `follow_clock` the loop sees the recorded clocks
    and leaves out what precedes the clock's first move (settling.py); the probe recorded no
    NVML reasons, so a clock below the series' highest is taken as the power limiter's (the
    probe runs nothing but GEMMs on an otherwise idle GPU)."""
    rule = StopRule(TARGET, MIN_SAMPLES, MAX_SAMPLES, TIME_CAP_S, min_time_s, limited_min_time_s)
    rows = [r for r in series if r[0] >= settle_s]
    top = max(mhz for _, _, mhz in rows)
    at = [-1]

    def take() -> float:
        at[0] += 1
        return rows[at[0]][1]

    def clock() -> ClockReading:
        mhz = rows[at[0]][2]
        return ClockReading(mhz, ("sw_power_cap",) if mhz < top else ()) if follow_clock else ClockReading()

    def now() -> float:  # a sample ends when the next begins
        i = at[0] + 1
        return rows[min(i, len(rows) - 1)][0]

    got = run_samples(Sampler("series", 1, take), rule, clock, now=now, reference=lambda: top, rest=lambda s: None)
    return statistics.median(got.samples), now() - rows[0][0] + settle_s


def spread(kernels: list[dict], settle_s: float, min_time_s: float, follow_clock: bool = False,
           limited_min_time_s: float = 0.0) -> str:
    """One line: how far the two histories' figures are apart under one rule."""
    devs, cost = [], []
    for k in kernels:
        heavy, t_heavy = figure(k["series"]["after-heavy"], settle_s, min_time_s, follow_clock, limited_min_time_s)
        idle, t_idle = figure(k["series"]["after-idle"], settle_s, min_time_s, follow_clock, limited_min_time_s)
        devs.append(abs(heavy / idle - 1))
        cost += [t_heavy, t_idle]
    within = sum(d <= AGREEMENT for d in devs)
    return (f"within 3% {within:2d}/{len(devs)}, max {100 * max(devs):5.1f}%, mean time {statistics.mean(cost):.2f} s"
            " | " + " ".join(f"{100 * d:4.1f}" for d in devs))


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    data = json.loads(path.read_text())
    kernels = data["kernels"]
    print(f"# {data['device']}: {len(kernels)} kernels, series of {data['series_s']} s after a large GEMM and "
          f"after idle ({path.name})")
    print("# per kernel: |after-heavy / after-idle - 1| in %; " + ", ".join(f"{k['precision']} {k['id']}"
                                                                          for k in kernels))
    for settle in SETTLE_S:
        for min_time in MIN_TIME_S:
            print(f"settle {settle:.2f} s, min-time {min_time:.2f} s: {spread(kernels, settle, min_time)}")
    for min_time in MIN_TIME_S:
        print(f"from the clock's first move, min-time {min_time:.2f} s: {spread(kernels, 0.0, min_time, True)}")
    default = MODES["default"]
    low, limited = default["min_time_s"], default["limited_min_time_s"]
    print(f"the default mode (from the first move, min-time {low} s, {limited} s under the limiter): "
          f"{spread(kernels, 0.0, low, True, limited)}")


if __name__ == "__main__":
    main()
