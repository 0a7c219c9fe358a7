"""The CPU's vendor and instruction-set flags, as the kernel reports them in /proc/cpuinfo.

MKL picks its code path by the processor (an AMD EPYC is not given the paths an Intel Xeon is), so every
result records the vendor beside the path MKL says is in effect; and MKL's 16-bit GEMMs are run only where
the CPU has the instructions they are made for (declaration.py GemmCall.isa), so that a slow emulation is
never passed off as the library's bf16 or fp16 GEMM."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ...system import cpu_model

CPUINFO = Path("/proc/cpuinfo")
# vendor_id -> the maker's name.
VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "HygonGenuine": "Hygon"}


@dataclass(frozen=True)
class CpuIsa:
    vendor: str  # the maker, with the vendor_id it reads as: "Intel (GenuineIntel)"
    model: str
    flags: frozenset[str]

    def lacks(self, needed: tuple[str, ...]) -> bool:
        """Whether the CPU has none of `needed` (any one of them will do)."""
        return bool(needed) and not self.flags.intersection(needed)


def parse(text: str) -> CpuIsa:
    """The first processor's vendor_id and flags (every core of a machine MKL runs on reports the same)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in ("vendor_id", "flags", "model name") and key not in fields:
            fields[key] = value.strip()
    vendor_id = fields.get("vendor_id", "")
    vendor = f"{VENDORS[vendor_id]} ({vendor_id})" if vendor_id in VENDORS else (vendor_id or "unknown")
    return CpuIsa(vendor, fields.get("model name", ""), frozenset(fields.get("flags", "").split()))


@cache
def this_cpu() -> CpuIsa:
    try:
        found = parse(CPUINFO.read_text())
    except OSError:
        return CpuIsa("unknown", cpu_model(), frozenset())
    return found if found.model else CpuIsa(found.vendor, cpu_model(), found.flags)
