"""Roofline figures from a source's measured ceilings (host side, the same definition as the GPU
backend's per-part figure).

A kernel cannot run faster than its FLOPs at the measured compute peak of its precision
(`tflops_<precision>`) nor than its fewest bytes at the measured copy bandwidth (`gbps_copy`);
the larger of the two times is its bound, and `% of peak` is that bound over the measured
median (100% = on the roof). A source without measured ceilings (references, runs made before
CPU runs measured theirs) has no bound: reports leave the columns blank and say why. A collective
has none either: its ceiling is the links between ranks, not the device's copy bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepbench.kernels.backends import declared
from deepbench.kernels.catalog import traits_of

from .sources import Entry

TFLOPS = 1e12
GBPS = 1e9
US = 1e-6


@dataclass(frozen=True)
class Roof:
    bound: str  # "compute" or "memory"
    bound_us: float
    pct_of_peak: float


def compute_peak(ceilings: dict[str, float], precision: str) -> float | None:
    """TFLOP/s measured for this precision, if any."""
    return ceilings.get(f"tflops_{precision}")


def bandwidth(ceilings: dict[str, float]) -> float | None:
    """GB/s of a device-to-device copy, if measured."""
    return ceilings.get("gbps_copy")


def intensity(entry: Entry) -> float | None:
    """Arithmetic intensity: FLOPs per fewest byte moved."""
    return entry.flops / entry.min_bytes if entry.flops and entry.min_bytes else None


def roof(entry: Entry, ceilings: dict[str, float]) -> Roof | None:
    if not entry.ok or not entry.median_us or traits_of(entry.kernel.op).collective:
        return None
    times = {}
    peak = compute_peak(ceilings, entry.precision)
    bw = bandwidth(ceilings)
    if peak and entry.flops:
        times["compute"] = entry.flops / (peak * TFLOPS) / US
    if bw and entry.min_bytes:
        times["memory"] = entry.min_bytes / (bw * GBPS) / US
    if not times:
        return None
    kind = max(times, key=times.__getitem__)
    return Roof(kind, times[kind], 100.0 * times[kind] / entry.median_us)


def no_roof_reason(ceilings: dict[str, float], kind: str) -> str:
    if kind == "reference":
        return "published figures: no measured ceilings"
    if not ceilings:
        measuring = "; ".join(
            f"the {name} backend measures them on {d.ceilings_on}" for name, d in declared().items() if d.ceilings_on
        )
        return f"this run recorded no measured ceilings ({measuring or 'no backend here measures them'})"
    return ""
