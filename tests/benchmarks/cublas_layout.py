"""Show, with cuBLAS's own API log, that the library receives DeepBench's (transa, transb, m, n, k),
with m, n and k as DeepBench's gemm_bench padded them for tensor cores (kernels/padding.py).

PyTorch is row-major; kernels/backends/pytorch/gemm.py lays operands out so that the cuBLAS call
is DeepBench's column-major problem. This script runs a few DeepBench GEMMs (every layout) in a
child process with cuBLAS's logging on (CUBLAS_LOGINFO_DBG / CUBLAS_LOGDEST_DBG, and cuBLASLt's
CUBLASLT_LOG_LEVEL for calls PyTorch routes through cuBLASLt), parses the logged arguments and
prints them beside DeepBench's. Exit 0 when every kernel's call matches.

    python tests/benchmarks/cublas_layout.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, torch
from deepbench.kernels.backends.pytorch.backend import TorchBackend
from deepbench.kernels.catalog import by_id
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Settings
b = TorchBackend(Settings(device="cuda"))
b._ceilings = {}
for kid, prec in json.loads(sys.argv[1]):
    part = b.prepare(by_id()[kid], Precision(prec)).parts[0]
    torch.cuda.synchronize()
    print("@@KERNEL", kid, prec, flush=True)
    sys.stderr.write(f"@@KERNEL {kid} {prec}\n"); sys.stderr.flush()
    part.run()
    torch.cuda.synchronize()
"""

ARG = re.compile(r"\b(transa|transb|m|n|k|transA|transB)\s*[:=]\s*(?:type=\S+;\s*)?val=(?:CUBLAS_OP_)?([A-Za-z0-9_]+)")


def pick_kernels() -> list[tuple[str, str]]:
    from deepbench.kernels.suites import select

    chosen: dict[tuple, str] = {}
    named = {(1760, 128, 1760), (5124, 9124, 2560)}
    for k in select("train", ops=["gemm"]):
        key = (k.m, k.n, k.k, k.a_t, k.b_t) if (k.m, k.n, k.k) in named else (k.a_t, k.b_t)
        chosen.setdefault(key, k.id)
    return [(kid, p) for kid in chosen.values() for p in ("fp32", "fp16")]


def main() -> int:
    from deepbench.kernels.catalog import by_id
    from deepbench.kernels.padding import gemm_shape
    from deepbench.kernels.precision import Precision

    kernels = pick_kernels()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "cublas.log"
        env = {
            **os.environ,
            "CUBLAS_LOGINFO_DBG": "1",
            "CUBLAS_LOGDEST_DBG": str(log),
            "CUBLASLT_LOG_LEVEL": "5",
            "CUBLASLT_LOG_FILE": str(Path(tmp) / "cublaslt.log"),
        }
        subprocess.run([sys.executable, "-c", CHILD, json.dumps(kernels)], env=env, check=True)
        text = log.read_text(errors="replace") if log.exists() else ""
        lt = Path(tmp) / "cublaslt.log"
        lt_text = lt.read_text(errors="replace") if lt.exists() else ""
    # The child marks each kernel on stderr, not in the log; split the log into API calls instead.
    calls = [c for c in re.split(r"\n(?=I! cuBLAS \(v[\d.]+\) function )", text) if "gemm" in c.lower()[:200]]
    print(
        f"cuBLAS log: {len(text.splitlines())} lines, {len(calls)} GEMM calls; cuBLASLt log: "
        f"{len(lt_text.splitlines())} lines"
    )
    ok = True
    for (kid, prec), call in zip(kernels, calls, strict=False):
        k = by_id()[kid]
        padded = gemm_shape(k.m, k.n, k.k, k.a_t, k.b_t, Precision(prec))  # the default --pad deepbench
        want = {
            "transa": "T" if k.a_t else "N",
            "transb": "T" if k.b_t else "N",
            **{dim: str(padded[dim]) for dim in ("m", "n", "k")},
        }
        got = {}
        for name, val in ARG.findall(call):
            got.setdefault(name.lower(), val[0] if name.lower().startswith("trans") else val)
        header = call.splitlines()[0][:100]
        match = all(got.get(key) == v for key, v in want.items())
        ok &= match
        print(f"{kid:14} {prec:5} DeepBench {want}  cuBLAS {got}  {'MATCH' if match else 'DIFFERS'}  [{header}]")
    if len(calls) < len(kernels):
        print(f"only {len(calls)} GEMM calls logged for {len(kernels)} kernels; first 40 lines of the log:")
        print("\n".join(text.splitlines()[:40]))
        print("cuBLASLt log excerpt:\n" + "\n".join(lt_text.splitlines()[:40]))
        ok = False
    print("SUMMARY cublas layout:", "every call is DeepBench's problem" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
