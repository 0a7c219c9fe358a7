"""What an operation says about itself, so that the host never branches on an operation's name.

Each kernel class (kernels/catalog.py, layers.py, model_kernel.py) carries `TRAITS`: its title,
what its throughput is rated in, its report columns, whether it runs across ranks or stands for
a whole model, and which rule bounds its check's tolerance. The runner's tables, workbook,
fastest, compare and HTML read these traits through `traits_of(op)` (records carry the op
name); a new operation is its kernel class with its traits, its cost formulas and its backend
modules, registered with `kernels.catalog.register_kernel`.

How an operation's time adds up from its parts is the kernel class's `DIRECTIONS`: the directions
timed separately, whose medians sum to the kernel's time (a collective's out-of-place twin is
timed beside it and is not part of the sum).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Rate(str, Enum):
    """What an operation's throughput is rated in: FLOPs over time, or bytes over time."""

    TFLOPS = "TFLOP/s"
    GBPS = "GB/s"

    @property
    def column(self) -> str:
        """The throughput column's header in tables (DeepBench's words)."""
        return "TFLOPS" if self is Rate.TFLOPS else "GB/s"

    @property
    def workbook_column(self) -> str:
        """The throughput column's header in DeepBench's workbooks."""
        return "TERAFLOPS" if self is Rate.TFLOPS else "Gigabytes/sec"


class Tolerance(str, Enum):
    """Which rule bounds the tolerance of an operation's check (kernels/precision.py): the
    precision's floor scaled by the reduction length, the recurrence's derived bound, the
    Winograd/FFT transforms' bound, or the whole-model bound (kernels/model_kernel.py)."""

    REDUCTION = "reduction"
    RECURRENCE = "recurrence"
    TRANSFORM = "transform"
    WHOLE_MODEL = "whole-model"


@dataclass(frozen=True)
class InfoColumn:
    """An extra column of the run table, read from a result's `info`: `path` walks nested keys
    (("dense_time_us", "median")); `kind` says how to format it: "us" a time, "num" a number."""

    header: str
    path: tuple[str, ...]
    kind: str = "num"
    digits: int = 2
    droppable: bool = False

    def value(self, info: Mapping[str, Any]) -> Any:
        value: Any = info
        for key in self.path:
            value = value.get(key) if isinstance(value, Mapping) else None
        return value


@dataclass(frozen=True)
class OpTraits:
    """An operation's description for the host (see the module docstring).

    `field_headers`: DeepBench's workbook words for the kernel's fields (a field not named keeps
    its own name); `direction_headers`: workbook words for directions where the operation's
    differ from the shared ones. `collective`: runs across ranks (one process each): results are
    matched by rank count, reports show the ranks, there is no roofline and no bandwidth on one
    rank, and several ranks run only collectives. `composite`: a whole model, timed as one call
    beside the operator kernels it is made of; not an operator type of its own.
    `fixed_precision`: the only precision the operation is defined in (None: any).
    `entry_extras`: (report key, result info key) pairs copied into a report entry."""

    title: str
    rated_in: Rate = Rate.TFLOPS
    field_headers: Mapping[str, str] = field(default_factory=dict)
    direction_headers: Mapping[str, str] = field(default_factory=dict)
    run_columns: tuple[InfoColumn, ...] = ()
    collective: bool = False
    composite: bool = False
    tolerance: Tolerance = Tolerance.REDUCTION
    fixed_precision: str | None = None
    entry_extras: tuple[tuple[str, str], ...] = ()

    def field_header(self, name: str) -> str:
        return self.field_headers.get(name, name)
