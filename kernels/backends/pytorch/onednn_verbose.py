"""Which oneDNN implementation a PyTorch CPU call ran, in oneDNN's own words.

On aarch64 one `torch.mm` or convolution may run the Arm Compute Library through oneDNN
(`gemm:acl`, `acl:...`), oneDNN's own JIT kernels (`jit:...`, `brg:...`), its reference code
(`ref:...`), or not touch oneDNN at all (OpenBLAS, NNPACK, PyTorch's own loops), depending on the
shape, the type and the CPU; PyTorch does not say which. oneDNN does: with verbose on it prints a
line per primitive executed (`onednn_verbose,...,exec,cpu,<primitive>,<implementation>,...`).
`torch.backends.mkldnn.verbose` turns it on for one call; oneDNN writes with C stdio to file
descriptor 1, which the harness uses for its events, so the call runs with fd 1 redirected to a
temporary file, read back and parsed. The call is an extra one, after the timed ones."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch

PREFIX = "onednn_verbose"
EXEC = "exec"
NONE_RAN = "no oneDNN primitive ran: PyTorch sent this call elsewhere (OpenBLAS, NNPACK, XNNPACK or its own kernels)"


def _capture_stdout(fn: Callable[[], object]) -> str:
    """What `fn` writes to file descriptor 1 (C stdio included), nothing of it reaching fd 1."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as out:
        os.dup2(out.fileno(), 1)
        try:
            fn()
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        return out.read().decode(errors="replace")


def parse(text: str) -> dict[str, Any]:
    """The primitives executed (primitive, implementation, problem, ms), and the info lines
    (library version, ISA, threads) when oneDNN printed them (once per process)."""
    executed, info = [], []
    for line in text.splitlines():
        fields = line.strip().split(",")
        if not fields or fields[0] != PREFIX:
            continue
        if EXEC in fields:  # v3.x: onednn_verbose,v1,primitive,exec,cpu,...; older: onednn_verbose,exec,cpu,...
            rest = fields[fields.index(EXEC) + 1 :]
            if len(rest) >= 3:
                executed.append(
                    {
                        "primitive": rest[1],
                        "implementation": rest[2],
                        "problem": rest[-2] if len(rest) >= 2 else "",
                        "ms": _float(rest[-1]),
                    }
                )
        elif "info" in fields and not fields[fields.index("info") + 1].startswith("template:"):
            info.append(",".join(fields[fields.index("info") + 1 :]))
    return {"executed": executed, "info": info}


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def implementations(fn: Callable[[], object]) -> dict[str, Any]:
    """One call of `fn` with oneDNN's verbose log on: what ran, for the result's info."""
    if not torch.backends.mkldnn.is_available():
        return {"note": "this PyTorch has no oneDNN"}

    def traced() -> None:
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            fn()

    seen = parse(_capture_stdout(traced))
    out: dict[str, Any] = {
        "implementations": sorted({f"{e['primitive']}:{e['implementation']}" for e in seen["executed"]}),
        "acl": any("acl" in e["implementation"] for e in seen["executed"]),
        "executed": seen["executed"],
    }
    if not seen["executed"]:
        out["note"] = NONE_RAN
    if seen["info"]:
        out["info"] = seen["info"]
    return out
