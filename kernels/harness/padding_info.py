"""The typed `info` the harness adds to a result under --pad both (execute.py): the kernel measured
again at its listed shape (`unpadded`), and the raw time over the padded one (`alignment_penalty`,
DeepBench's alignment penalty). `finish` and the run table read it through `info_of`; the JSON keeps
the keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..backends.contract.declaration import PartInfo
from ..results import TimeStats


class Unpadded(BaseModel):
    """The unpadded twin: its time, else why there is none (`note`: the backend does not pad,
    `failed`: its check failed); `parts` and `check` kept as recorded."""

    model_config = ConfigDict(frozen=True, extra="allow")
    time_us: TimeStats | None = None
    note: str = ""
    failed: str = ""


class PaddingInfo(PartInfo):
    """A result's unpadded twin and the alignment penalty `finish` derives from it."""

    unpadded: Unpadded | None = None
    alignment_penalty: float | None = None

    def penalty(self, padded_median_us: float) -> float | None:
        """The raw shape's median over the padded one's (None without an unpadded time)."""
        if self.unpadded is None or self.unpadded.time_us is None:
            return None
        return self.unpadded.time_us.median / padded_median_us
