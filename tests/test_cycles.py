"""Verdicts in cycles (runner/analysis/like_for_like.py) on recorded clocks: the published H100
train run's GEMMs (their SM clocks, samples and roofline bounds as measured) against the same
kernels on a card clocked 8% lower, whose times are 8% longer: slower in time, the same in cycles;
memory-bound kernels, whose memory clock did not move, keep their time verdict. And the clock
fall during sampling (settling.clock_fell) flagged with NVML's reasons."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from deepbench.kernels.timing.settling import ClockReading, clock_fell
from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.like_for_like import CLOCK_THRESHOLD, clock_fell_lines, cycle_ratios, notes
from deepbench.runner.analysis.sources import Entry, load_run

PUBLISHED = Path(__file__).parents[1] / "runner" / "published" / "nvidia-h100" / "train"
SLOWER_CLOCK = 1.08


def _slower_card(e: Entry) -> Entry:
    """The kernel on a card whose SM clock is SLOWER_CLOCK lower: every sample that much longer."""
    return replace(
        e,
        parts_us={d: t * SLOWER_CLOCK for d, t in e.parts_us.items()},
        part_samples={d: tuple(x * SLOWER_CLOCK for x in xs) for d, xs in e.part_samples.items()},
        median_us=e.median_us * SLOWER_CLOCK if e.median_us else None,
        extra={
            **e.extra,
            "sm_mhz": e.extra["sm_mhz"] / SLOWER_CLOCK,
            "clock_fell": {
                "from_mhz": e.extra["sm_mhz"],
                "to_mhz": e.extra["sm_mhz"] / SLOWER_CLOCK,
                "readings": 3,
                "reasons": ["sw_power_cap"],
            },
        }
        if "sm_mhz" in e.extra
        else e.extra,
    )


def test_recorded_gemms_judged_in_cycles() -> None:
    run = load_run(PUBLISHED)
    base = replace(run, label="card A", entries=tuple(e for e in run.entries if e.kernel.op == "gemm" and e.ok))
    other = replace(base, label="card B", entries=tuple(_slower_card(e) for e in base.entries))
    assert all("sm_mhz" in e.extra for e in base.entries)  # every recorded GEMM carries its clocks
    cmp = compare([base, other])
    judged = cycle_ratios(cmp, 0)
    compute = [c for e, c in judged if c.clock == "sm"]
    memory_bound = [e for e in base.entries if e.extra.get("bound") == "memory"]
    assert compute and len(judged) == len(base.entries) - len(memory_bound)
    assert all(abs(c.other_mhz / c.base_mhz - 1) > CLOCK_THRESHOLD for c in compute)
    slower_in_time = sum(c.time.verdict == "slower" for c in compute)
    same_in_cycles = sum(c.verdict == "same" for c in compute)
    assert slower_in_time >= 0.9 * len(compute) and same_in_cycles >= 0.95 * len(compute)
    said = notes(cmp)
    assert any("judged in cycles" in line and f"same {same_in_cycles}" in line for line in said)
    assert any("clock fell while" in line and "sw_power_cap" in line for line in said)


def test_close_clocks_and_missing_clocks_keep_the_time_verdict() -> None:
    run = load_run(PUBLISHED)
    base = replace(run, entries=tuple(e for e in run.entries if e.kernel.op == "gemm" and e.ok)[:20])
    near = replace(
        base,
        label="near",
        entries=tuple(
            replace(e, extra={**e.extra, "sm_mhz": e.extra["sm_mhz"] * (1 - CLOCK_THRESHOLD / 2)}) for e in base.entries
        ),
    )
    assert not cycle_ratios(compare([base, near]), 0)
    bare = replace(base, label="bare", entries=tuple(replace(e, extra={}) for e in base.entries))
    assert not cycle_ratios(compare([base, bare]), 0) and not clock_fell_lines(compare([base, bare]))


def test_clock_fell_names_nvml_reasons() -> None:
    steady = [ClockReading(1980.0, ("sw_power_cap",)), ClockReading(1965.0, ("sw_power_cap",))]
    assert clock_fell(steady) is None and clock_fell([ClockReading()]) is None
    fell = clock_fell([*steady, ClockReading(1710.0, ("sw_power_cap", "hw_slowdown")), ClockReading(1755.0, ())])
    assert fell == {"from_mhz": 1980.0, "to_mhz": 1710.0, "readings": 2, "reasons": ["hw_slowdown", "sw_power_cap"]}


def test_cycles_agreement_script_takes_the_clocks_out() -> None:
    """tests/benchmarks/cycles_agreement.py on the recorded GEMMs against the card clocked 8% lower:
    every compute-bound kernel 8% slower in time and the same in cycles; the memory-bound ones, whose
    memory clock did not move, stay 8% apart."""
    from .conftest import load_benchmark

    script = load_benchmark("cycles_agreement")
    run = load_run(PUBLISHED)
    base = replace(run, label="card A", entries=tuple(e for e in run.entries if e.kernel.op == "gemm" and e.ok))
    other = replace(base, label="card B", entries=tuple(_slower_card(e) for e in base.entries))
    found = script.kernels(base, other)
    compute = [k for k in found if k.clock == "sm"]
    assert compute and all(abs(k.time - SLOWER_CLOCK) < 0.01 and abs(k.cycles - 1) < 0.01 for k in compute)
    assert all(abs(k.cycles - SLOWER_CLOCK) < 0.01 for k in found if k.clock == "memory")
    lines, met = script.summary(found, script.WITHIN, 0.0)
    assert met and lines[0].startswith(f"SUMMARY compute-bound (SM clock): {len(compute)} kernels")
    assert f"within 3% in cycles: {len(compute)} (100.0%); in time: 0" in lines[0]
