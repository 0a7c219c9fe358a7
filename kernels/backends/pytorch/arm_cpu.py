"""PyTorch on an ARM CPU (`--platform arm --backend torch`): the Arm Compute Library through
PyTorch's aarch64 build (oneDNN with ACL), beside LiteRT and onnxruntime on the same board.

The torch backend runs there as on any CPU; what this adds is what an ARM board's result needs:
the board's facts (model, SoC, clusters, clocks, temperature, throttling, emulation: board.py) and
a kernel flagged when the board throttled while it was measured; for each timed part, which
oneDNN implementation ran (onednn_verbose.py: ACL's or another); and bf16 only where the CPU has
BF16 instructions (FEAT_BF16, Armv8.6: not a Raspberry Pi's Cortex-A72/A76), since elsewhere
PyTorch would convert bfloat16 in software and the figure would not be a bf16 unit's."""

from __future__ import annotations

import platform
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ...precision import Precision
from ..contract.base import TimedPart, Unsupported
from ..cpu import board
from . import onednn_verbose

ARM_MACHINES = ("aarch64", "arm64")
# PyTorch's aarch64 wheels carry ACL as a library of their own (auditwheel's torch.libs/); ACL writes its
# version into it ("arm_compute_version=v25.02 Build options: ...").
ACL_LIBRARY = "libarm_compute-*.so*"
ACL_VERSION = re.compile(rb"arm_compute_version=(v[0-9][0-9.]*)")


def acl_library() -> Path | None:
    here = Path(torch.__file__).parent
    found = sorted(p for folder in (here / "lib", here.parent / "torch.libs") for p in folder.glob(ACL_LIBRARY))
    return found[0] if found else None


def acl_version(library: Path) -> str | None:
    try:
        match = ACL_VERSION.search(library.read_bytes())
    except OSError:
        return None
    return match.group(1).decode() if match else None


def is_arm_cpu(device: torch.device) -> bool:
    return device.type == "cpu" and platform.machine().lower() in ARM_MACHINES


class ArmCpu:
    def __init__(self) -> None:
        self.board = board.BoardMonitor()
        self.onednn_info: list[str] = []

    def require(self, precision: Precision) -> None:
        if precision is Precision.BF16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            raise Unsupported(
                "bf16 needs the CPU's BF16 instructions (FEAT_BF16, Armv8.6), which this CPU lacks: "
                "PyTorch would convert bfloat16 in software; fp32 and int8 run"
            )

    def after_measure(self, fn: Callable[[], object], part: TimedPart) -> None:
        """Flag the part if the board throttled while it was measured, then one more call with
        oneDNN's verbose log on: which implementation ran."""
        self.board.mark(part.info)
        ran = onednn_verbose.implementations(fn)
        self.onednn_info = self.onednn_info or ran.pop("info", [])
        ran.pop("info", None)
        part.info["onednn"] = ran

    def device_facts(self) -> dict[str, Any]:
        return {**self.board.facts, "bf16_instructions": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())}

    def library_versions(self) -> dict[str, str]:
        library = acl_library()
        if library is None:
            return {"acl": "absent: this PyTorch build carries no Arm Compute Library"}
        return {"acl": f"{acl_version(library) or 'version not found'} ({library.name})"}

    def facts_after(self) -> dict[str, Any]:
        after = self.board.after()
        if self.onednn_info:
            after["onednn_info"] = self.onednn_info
        return after
