"""What the mkl backend declares (backends/contract/declaration.py), importable without MKL: the GEMM routines
it calls per precision with MKL's own types, the instructions the 16-bit ones need, its option (the GEMM
call: direct, or packed as DeepBench's sbench_pack ran it), its CLI group, and the typed info each part
records (the call, its leading dimensions, and MKL's runtime: version, threading, instruction set, CPU)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...precision import Precision
from ...results import KernelResult
from ..contract.declaration import BackendDeclaration, BackendOptions, PartInfo, add_choice

GemmMode = Literal["direct", "packed"]


@dataclass(frozen=True)
class GemmCall:
    """One precision's GEMM in MKL: the direct routine, the packed API's three, MKL's C types of A, B and C,
    and the CPU flags (any one of them) the routine is made for (none: it runs on any x86-64 CPU)."""

    direct: str
    pack_size: str
    pack: str
    compute: str
    a: str
    b: str
    c: str
    isa: tuple[str, ...] = ()

    def routine(self, mode: str) -> str:
        return self.direct if mode == "direct" else f"{self.pack} (A and B) + {self.compute}"


def _call(name: str, a: str, b: str, c: str, isa: tuple[str, ...] = ()) -> GemmCall:
    return GemmCall(
        f"cblas_{name}", f"cblas_{name}_pack_get_size", f"cblas_{name}_pack", f"cblas_{name}_compute", a, b, c, isa
    )


# The precisions MKL's GEMM runs here. int8 is DeepBench's Intel call: A int8, B uint8, C int32, fixed zero
# offsets. MKL's 16-bit GEMMs take 16-bit A and B and write float32 C (it has no 16-bit output).
CALLS: dict[Precision, GemmCall] = {
    Precision.FP32: _call("sgemm", "float", "float", "float"),
    Precision.INT8: _call("gemm_s8u8s32", "MKL_INT8", "MKL_UINT8", "MKL_INT32"),
    Precision.BF16: _call("gemm_bf16bf16f32", "MKL_BF16", "MKL_BF16", "float", ("avx512_bf16", "amx_bf16")),
    Precision.FP16: _call("gemm_f16f16f32", "MKL_F16", "MKL_F16", "float", ("avx512_fp16", "amx_fp16")),
}
# The sparse product (inspector-executor sparse BLAS): float32, as DeepBench's spmm_bench.cpp ran it.
SPARSE_CALLS = {Precision.FP32: ("mkl_sparse_s_mm", "mkl_sparse_s_mv")}
INSTALL_HINT = "pip install 'deepbench[intel]'"


class MklOptions(BackendOptions):
    gemm: GemmMode = Field(
        "direct",
        description="MKL's GEMM call: direct (cblas_sgemm and its kin, DeepBench's sbench), or packed: A and B "
        "packed once outside the timed call, then cblas_*gemm_compute on the packed matrices (DeepBench's "
        "sbench_pack)",
    )


class MklRuntimeInfo(BaseModel):
    """MKL as it ran the part: its version string, threading layer and threads, the instruction set of its
    code path, and the CPU it chose that path for."""

    model_config = ConfigDict(frozen=True, extra="allow")
    version: str
    threading_layer: str
    threads: int
    dynamic: bool
    isa: str
    cpu_vendor: str
    cpu_model: str = ""


class MklBlasCall(BaseModel):
    """The GEMM call as MKL received it (column-major, DeepBench's transposes and sizes) and the rule its
    leading dimensions follow."""

    model_config = ConfigDict(frozen=True, extra="allow")
    layout: str = "CblasColMajor"
    transa: Literal["N", "T"]
    transb: Literal["N", "T"]
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    leading_dimensions: str


class MklSparseCall(BaseModel):
    """The sparse product as MKL received it."""

    model_config = ConfigDict(frozen=True, extra="allow")
    operation: str
    layout: str
    m: int
    n: int
    k: int
    nnz: int
    ldx: int
    ldy: int
    expected_calls: int


class MklPartInfo(PartInfo):
    """A part MKL ran: the routine (and how: direct or packed), the call, and MKL's runtime."""

    library: Literal["MKL"] = "MKL"
    call: str
    mode: str = ""
    mkl: MklRuntimeInfo
    blas_call: MklBlasCall | None = None
    sparse_call: MklSparseCall | None = None


class MklDeclaration(BackendDeclaration[MklOptions]):
    part_info = MklPartInfo
    precisions = CALLS
    libraries = ("MKL",)
    install_hint = INSTALL_HINT
    # spmm_bench.cpp's comparison, made the way the cuSPARSE backend makes it: MKL's own dense GEMM beside.
    dense_backend = "mkl"

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        add_choice(
            group,
            "--mkl-gemm",
            MklOptions,
            "gemm",
            "CPU (mkl backend): MKL's GEMM call: direct (default) cblas_sgemm, cblas_gemm_s8u8s32 and the "
            "16-bit routines, as DeepBench's Intel sbench; packed: A and B packed once before timing "
            "(cblas_*_pack), the timed call cblas_*_compute on them, as DeepBench's sbench_pack",
        )

    def options_from(self, args: argparse.Namespace) -> MklOptions:
        return MklOptions(gemm=args.mkl_gemm)

    def to_args(self, options: MklOptions) -> list[str]:
        return [] if options.gemm == "direct" else ["--mkl-gemm", options.gemm]

    def replay(self, options: MklOptions, results: Iterable[KernelResult]) -> MklOptions:
        """The options as the submission gave them: the call is what they name, and MKL chooses its kernels
        inside the call without saying which, so there is nothing more to pin."""
        return options


MKL = MklDeclaration("mkl", MklOptions)
