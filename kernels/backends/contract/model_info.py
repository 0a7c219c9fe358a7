"""The typed `info` of a whole-model result (kernels/model_kernel.py), as the backends that run
whole models write it (pytorch/model.py, onnxruntime/model.py): the inputs one call handles, and
the inputs per second the harness's `finish` derives at the median. Light (pydantic only), so that
the harness reads it without loading those backends; the JSON keeps the keys."""

from __future__ import annotations

from typing import Any

from .declaration import PartInfo


class ModelRunInfo(PartInfo):
    """A whole model's batch per call, and its throughput once timed."""

    items_per_call: int | None = None
    throughput_per_s: float | None = None

    @staticmethod
    def of_batch(batch: int) -> dict[str, Any]:
        """A prepared whole model's info: the inputs (images, sequences) one call handles."""
        return ModelRunInfo(items_per_call=batch).model_dump(exclude_none=True)

    def throughput(self, median_s: float) -> float | None:
        """Inputs per second at the median, in seconds (None where the result is not a whole model's)."""
        return None if self.items_per_call is None else self.items_per_call / median_s
