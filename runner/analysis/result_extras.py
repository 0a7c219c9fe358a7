"""What a comparison needs of a result beyond its times (like_for_like.py): the inputs it drew, the
clocks it ran at, whether it is memory-bound and whether its clock fell, kept in its Entry's extra."""

from __future__ import annotations

import statistics
from typing import Any

from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.results import Energy, KernelResult
from deepbench.kernels.timing.part_notes import RooflineInfo, TimerNotes

MEMORY_BOUND = "memory"


def result_extras(r: KernelResult) -> dict[str, Any]:
    """A result's inputs, clocks, bound and clock fall, for an Entry's extra (empty where unrecorded)."""
    out: dict[str, Any] = {}
    if r.inputs is not None:
        out["inputs"] = r.inputs
    clocks = [c for p in r.parts for c in p.measurement.clocks_mhz]
    if clocks:
        out["sm_mhz"] = statistics.median(clocks)
    mem = [p.measurement.mem_clock_mhz for p in r.parts if p.measurement.mem_clock_mhz]
    if mem:
        out["mem_mhz"] = statistics.median(mem)
    rooflines = [info_of(RooflineInfo, p.info) for p in r.parts]
    bounds = {info.roofline.bound if info and info.roofline else None for info in rooflines}
    if bounds == {MEMORY_BOUND}:
        out["bound"] = MEMORY_BOUND
    energies = [p.measurement.energy for p in r.parts]
    if r.parts and all(e is not None for e in energies):  # --energy: the kernel's joules per call, all directions
        out.update(energy_extras([e for e in energies if e is not None]))
    notes = [info_of(TimerNotes, p.info) for p in r.parts]
    fell = [n.clock_fell for n in notes if n is not None and n.clock_fell is not None]
    if fell:
        out["clock_fell"] = fell[0].recorded()
    return out


def energy_extras(energies: list[Energy]) -> dict[str, float]:
    """A kernel's energy over all its directions: joules per call summed, average watts (those joules
    over the loops' time per call), and GFLOP/J or GB/J weighted by each direction's joules (that is,
    the kernel's work over its energy), where every direction has them."""
    joules = sum(e.joules_per_call for e in energies)
    out = {"joules_per_call": joules, "watts": joules / (sum(e.loop_us_per_call for e in energies) / 1e6)}
    if joules > 0:
        for key in ("gflops_per_j", "gb_per_j"):
            per_j = [getattr(e, key) for e in energies]
            if all(v is not None for v in per_j):
                out[key] = sum(v * e.joules_per_call for v, e in zip(per_j, energies, strict=True)) / joules
    return out
