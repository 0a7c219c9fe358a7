"""Does the energy counter agree with the integral of sampled power? Reads runs made with --energy
and prints, per kernel direction, the counter's joules over the energy loop's window (NVML's
nvmlDeviceGetTotalEnergyConsumption, from the loop's second update to its last), the integral of the
power readings sampled over the same window (nvmlDeviceGetPowerUsage, trapezoids), their ratio, the
window, the counter's update period, watts, joules per call and GFLOP/J; then a SUMMARY line: how
many of the parts whose window lasted at least --min-window seconds agree within --within, and which
power reading was sampled (meters.py: NVML's instantaneous field where the driver gives it; the
1 s average of nvmlDeviceGetPowerUsage lags a changing load).

Issue 44's target: within 5% for kernels timed at least one second. A script, not a unit test: its
inputs are GPU runs (tests/test_energy.py tests the loop on a fake NVML).

    python tests/benchmarks/energy_vs_power.py RUN [RUN ...] [--min-window 1.0] [--within 0.05]

Exit status: 0 when every long-enough part agrees, 1 when some do not (or none qualified), 2 when a
run cannot be read or has no energy records.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deepbench.kernels.results import RESULTS_FILE
from deepbench.kernels.results_file import read_results

WITHIN = 0.05
MIN_WINDOW_S = 1.0


def rows(run: Path) -> list[dict]:
    """One row per timed direction with an energy record (and why not, for those without)."""
    out = []
    for r in read_results(run / RESULTS_FILE):
        for p in r.parts:
            e = p.measurement.energy
            row = {"id": f"{r.id}/{p.direction}", "energy": e, "why": p.info.get("energy_error", "")}
            if e is not None and e.sampled_joules:
                row["ratio"] = e.joules / e.sampled_joules
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="results folders of runs made with --energy")
    ap.add_argument(
        "--min-window",
        type=float,
        default=MIN_WINDOW_S,
        metavar="S",
        help=f"parts whose energy window lasted at least this long count in the SUMMARY (default {MIN_WINDOW_S:g})",
    )
    ap.add_argument(
        "--within",
        type=float,
        default=WITHIN,
        metavar="FRACTION",
        help=f"agreement band of counter / integral (default {WITHIN:g})",
    )
    args = ap.parse_args(argv)
    try:
        found = [row for run in args.runs for row in rows(run)]
    except (OSError, ValueError) as exc:
        print(f"energy_vs_power: cannot read a run: {exc}", file=sys.stderr)
        return 2
    measured = [r for r in found if r["energy"] is not None]
    if not measured:
        why = sorted({r["why"] for r in found if r["why"]})
        print(
            "energy_vs_power: no energy records (run with --energy)"
            + (f"; the runs say: {'; '.join(why)}" if why else ""),
            file=sys.stderr,
        )
        return 2
    print(
        f"{'part':52} {'counter_J':>10} {'integral_J':>10} {'ratio':>6} {'window_s':>8} {'period_ms':>9} "
        f"{'watts':>7} {'J/call':>10} {'GFLOP/J':>8}"
    )
    for r in measured:
        e = r["energy"]
        period = f"{e.update_period_s * 1e3:9.1f}" if e.update_period_s else f"{'':9}"
        integral = f"{e.sampled_joules:10.2f}" if e.sampled_joules else f"{'-':>10}"
        ratio = f"{r['ratio']:6.3f}" if "ratio" in r else f"{'-':>6}"
        gflops = f"{e.gflops_per_j:8.1f}" if e.gflops_per_j else f"{'':8}"
        print(
            f"{r['id']:52} {e.joules:10.2f} {integral} {ratio} {e.window_s:8.3f} {period} {e.watts:7.1f} "
            f"{e.joules_per_call:10.3e} {gflops}"
        )
    long_enough = [r for r in measured if r["energy"].window_s >= args.min_window and "ratio" in r]
    agree = [r for r in long_enough if abs(r["ratio"] - 1) <= args.within]
    ratios = sorted(r["ratio"] for r in long_enough)
    spread = f", ratios {ratios[0]:.3f}-{ratios[-1]:.3f}, median {ratios[len(ratios) // 2]:.3f}" if ratios else ""
    print(
        f"SUMMARY: {len(agree)} of {len(long_enough)} parts with an energy window of at least "
        f"{args.min_window:g} s agree within {args.within:.0%} (counter / power integral){spread}; "
        f"{len(measured)} parts measured, {len(found) - len(measured)} without energy; power reading sampled: "
        + ", ".join(sorted({r["energy"].power_reading or "nvml-average (unnamed: an older record)" for r in measured}))
    )
    return 0 if long_enough and len(agree) == len(long_enough) else 1


if __name__ == "__main__":
    sys.exit(main())
