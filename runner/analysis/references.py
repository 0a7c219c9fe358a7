"""DeepBench's published results as reference runs, shipped as package data.

Baidu published one workbook per processor (a sheet per precision and a Specs sheet, times in
milliseconds). `tests/tools/import_references.py` converts them once into
`runner/data/references/*.json.gz` (this model, validated; gzipped: 1.6 MB of JSON in 0.2 MB);
the installed tool reads only those files, never ../shared. A reference holds no samples and was
never checked by us: it is shown as published, with the sheet's own precision text beside our
precision name.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from importlib import resources
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from deepbench.kernels.catalog import Kernel, by_id

from ..errors import UserError

REFERENCE_SCHEMA: Final = "deepbench.reference/1"
DATA_DIR = ("data", "references")
REFERENCE_SUFFIX: Final = ".json.gz"
# What the set folders of DeepBench's results are called in reference names.
SET_PREFIX = {"train": "train", "inference_server": "server", "inference_device": "device"}


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReferenceEntry(Frozen):
    """One kernel row of a published workbook, tied to the catalog kernel with its parameters."""

    kernel_id: str = Field(description="the catalog kernel with the row's parameters (op/set/index)")
    precision: str = Field(description="our precision name (fp32, fp16, int8) for the sheet's precision")
    precision_text: str = Field(description="the workbook's own words for the precision")
    status: Literal["ok", "unsupported"] = "ok"
    reason: str = ""
    times_ms: dict[str, float] = Field(default_factory=dict, description="per direction, as published (ms)")
    total_ms: float | None = Field(None, description="the workbook's total, or the sum of the directions")
    throughput: dict[str, float] = Field(default_factory=dict, description="TFLOPS/GB/s columns as published")
    extra: dict[str, Any] = Field(default_factory=dict, description="algorithm, padding, dense time, ranks ...")
    sheet: str
    row: int = Field(description="0-based row in the sheet, to find the figure in the workbook")

    @property
    def kernel(self) -> Kernel:
        return by_id()[self.kernel_id]


class Reference(Frozen):
    """One published workbook: who measured what on which processor, and its kernel rows."""

    schema_version: Literal["deepbench.reference/1"] = REFERENCE_SCHEMA
    name: str = Field(description="set/processor, e.g. train/V100")
    processor: str
    set: Literal["train", "inference_server", "inference_device"]
    source: str = Field(description="the workbook in DeepBench's repository")
    specs: dict[str, str]
    sheets: dict[str, str] = Field(description="sheet name -> its precision text")
    entries: tuple[ReferenceEntry, ...]
    skipped: tuple[str, ...] = Field((), description="rows not converted, and why")


def _files() -> list[Any]:
    folder = resources.files("deepbench.runner")
    for part in DATA_DIR:  # one name a step: joinpath takes several only from Python 3.11
        folder = folder / part
    return sorted((f for f in folder.iterdir() if f.name.endswith(REFERENCE_SUFFIX)), key=lambda f: f.name)


@cache
def references() -> dict[str, Reference]:
    """Every shipped reference by name, in name order."""
    out = {}
    for f in _files():
        ref = Reference.model_validate(json.loads(gzip.decompress(f.read_bytes())))
        out[ref.name] = ref
    return out


def find_reference(name: str, prefer_set: str | None = None) -> Reference:
    """A reference by full name (train/V100) or by processor alone (V100) where that is unique;
    `prefer_set` settles a processor published in several sets (T4: train and server)."""
    refs = references()
    wanted = name.strip().lower()
    exact = [r for n, r in refs.items() if n.lower() == wanted]
    if exact:
        return exact[0]
    by_proc = [r for r in refs.values() if r.processor.lower() == wanted]
    if len(by_proc) > 1 and prefer_set:
        preferred = [r for r in by_proc if r.set == prefer_set]
        by_proc = preferred or by_proc
    if len(by_proc) == 1:
        return by_proc[0]
    if by_proc:
        raise UserError(f"reference '{name}' is ambiguous: choose one of {', '.join(r.name for r in by_proc)}")
    raise UserError(f"unknown reference '{name}' (choose from: {', '.join(refs)}; see deepbench references)")
