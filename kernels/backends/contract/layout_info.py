"""The typed `info` of a convolution timed in a second memory layout beside its own (`--layout both`
of the cuDNN backend): each direction's time in the other layout, and the layout penalty the
reports derive from it (NCHW time over NHWC time, per direction). The result's own parts stay in
its first layout, so its time, the checker's directions and `compare` read as in any run; the
second layout lives only here. Light (pydantic only), so that the reports read it without loading
the backend that writes it; the JSON keeps the keys."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from ...results import PartResult, TimeStats
from .declaration import PartInfo, info_of

NCHW, NHWC = "NCHW", "NHWC"  # the layouts as results record them (a part's info.layout)


class OtherLayoutPart(BaseModel):
    """One direction timed in the other layout: its time, and what the backend recorded of it."""

    model_config = ConfigDict(frozen=True, extra="allow")
    time_us: TimeStats


class OtherLayout(BaseModel):
    """The kernel in its other layout: each direction's time, else why there is none (`note`: the
    library has no such convolution; `failed`: a check failed)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    layout: str
    parts: dict[str, OtherLayoutPart] = {}
    note: str = ""
    failed: str = ""


class PartLayout(PartInfo):
    """The layout a part ran in (its info.layout; empty where its backend records none)."""

    layout: str = ""


class LayoutInfo(PartInfo):
    """A result's other layout (the key `other_layout` of its info)."""

    other_layout: OtherLayout

    def penalties(self, parts: Iterable[PartResult]) -> dict[str, float]:
        """{direction: NCHW median over NHWC median} for the directions timed in both layouts."""
        out: dict[str, float] = {}
        for p in parts:
            other = self.other_layout.parts.get(p.direction)
            own = (info_of(PartLayout, p.info) or PartLayout()).layout
            if other is None or {own, self.other_layout.layout} != {NCHW, NHWC}:
                continue  # like with like: only an NCHW time over an NHWC time of the same direction
            own_us, other_us = p.measurement.stats.median, other.time_us.median
            out[p.direction] = own_us / other_us if own == NCHW else other_us / own_us
        return out
