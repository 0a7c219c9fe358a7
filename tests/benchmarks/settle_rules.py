"""How long to measure a GPU kernel so a second run agrees: candidate rules replayed offline on
series recorded by settle_probe.py (no GPU needed).

Each recorded series is one kernel's samples (us per call, in time order) for a few seconds,
taken once after 0.5 s of a large GEMM and once after 0.5 s idle. A rule here is the harness's
own stopping rule (kernels/timing/stopping.py: StopRule at the default mode's 1% target and 1 s
cap) with a minimum measuring time, applied after ignoring the first `settle` seconds. Per rule
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

from deepbench.kernels.timing.stopping import StopRule

DEFAULT = Path(__file__).resolve().parent / "results" / "settle-h100.json"
SETTLE_S = (0.0, 0.1, 0.2, 0.3)
MIN_TIME_S = (0.05, 0.1, 0.2, 0.3, 0.5)
AGREEMENT = 0.03
TARGET, MIN_SAMPLES, MAX_SAMPLES, TIME_CAP_S = 0.01, 5, 1000, 1.0  # runner/run.py MODES["default"]


def figure(series: list[list[float]], settle_s: float, min_time_s: float) -> tuple[float, float]:
    """(median of the samples the rule took, seconds from the series' start when it stopped)."""
    rule = StopRule(TARGET, MIN_SAMPLES, MAX_SAMPLES, TIME_CAP_S, min_time_s)
    rows = [r for r in series if r[0] >= settle_s]
    t0 = rows[0][0]
    taken: list[float] = []
    t = t0
    for i, (t, us, _mhz) in enumerate(rows):
        taken.append(us)
        finished = rows[i + 1][0] if i + 1 < len(rows) else t  # a sample ends when the next begins
        if rule.decide(taken, finished - t0):
            break
    return statistics.median(taken), t


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
            devs, cost = [], []
            for k in kernels:
                heavy, t_heavy = figure(k["series"]["after-heavy"], settle, min_time)
                idle, t_idle = figure(k["series"]["after-idle"], settle, min_time)
                devs.append(abs(heavy / idle - 1))
                cost += [t_heavy, t_idle]
            within = sum(d <= AGREEMENT for d in devs)
            print(f"settle {settle:.2f} s, min-time {min_time:.2f} s: within 3% {within:2d}/{len(devs)}, "
                  f"max {100 * max(devs):5.1f}%, mean time {statistics.mean(cost):.2f} s | "
                  + " ".join(f"{100 * d:4.1f}" for d in devs))


if __name__ == "__main__":
    main()
