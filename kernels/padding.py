"""DeepBench's padding rules: the problem its NVIDIA benchmarks handed the library.

DeepBench's `gemm_bench.cu` and `conv_bench.cu` did not run every kernel at its listed shape:
tensor cores (and cuBLAS's fast int8 path) need aligned dimensions, so the benchmarks padded
them, and the published figures are the padded problems' times. A harness that hands the
library the raw shape measures another problem: on an H100, fp16 4096x7133x4096 NT takes
1,600 us raw and about 330 us padded, because cuBLAS falls back to unaligned kernels.

GEMM (`gemm_bench.cu`, tensor-core half):     NN, TN: m and k;  NT: m and n;  TT: m, n and k,
                                               each to a multiple of 8 (16 bytes of fp16).
GEMM int8 (`gemm_bench.cu`):                   m to a multiple of 4; n and k as listed.
Convolution half (`conv_bench.cu`):            c and k to multiples of 8.
Convolution int8 (`conv_bench.cu`):            c, h and w to multiples of 4, then c and k to 32.

DeepBench knew only float, half and int8. The other tensor-core precisions follow the half rule
with the same 16-byte alignment (bf16: 8 elements, tf32: 4, fp8: 16), the alignment cuBLAS and
cuDNN ask of tensor-core operands; fp32 is never padded. The FLOP count of a result stays the
listed kernel's (DeepBench divided its listed FLOPs by the padded problem's time), and the padded
dimensions are recorded in the result's `padding`.

2:4 structured sparse GEMM (cuSPARSELt, not DeepBench's): the structured operand's dimensions
(m and k) to 32 bytes of its type and the dense operands' (n) to 16 bytes, the multiples
`cusparseLtStructuredDescriptorInit` and `cusparseLtDenseDescriptorInit` require (fp16/bf16:
16 and 8 elements; int8/fp8: 32 and 16). cuSPARSELt refuses other shapes, so `--pad none`
leaves such a kernel unsupported with the library's status.

`PadMode`: `deepbench` (the default) pads as above, `none` hands the library the raw shape, and
`both` measures the padded problem and the raw one beside it, so the report can show the
alignment penalty (raw time over padded time).
"""

from __future__ import annotations

from enum import Enum

from .precision import Precision


class PadMode(str, Enum):
    DEEPBENCH = "deepbench"
    NONE = "none"
    BOTH = "both"


# Elements per 16 bytes: the alignment tensor cores need, per input precision.
TENSOR_CORE_MULTIPLE = {
    Precision.FP16: 8,
    Precision.FP16ACC16: 8,
    Precision.BF16: 8,
    Precision.TF32: 4,
    Precision.FP8: 16,
}
INT8_GEMM_M_MULTIPLE = 4
CONV_HALF_CHANNEL_MULTIPLE = 8
CONV_INT8_SPATIAL_MULTIPLE = 4
CONV_INT8_CHANNEL_MULTIPLE = 32
# cuSPARSELt's descriptor constraints, in bytes: a structured matrix's rows, columns and leading
# dimension to 32 bytes, a dense matrix's to 16 bytes.
STRUCTURED_OPERAND_BYTES = 32
DENSE_OPERAND_BYTES = 16
# gemm_bench.cu's layout rule: which of (m, n, k) it padded, by (a_t, b_t).
GEMM_PADDED_DIMS = {
    (False, False): ("m", "k"),
    (True, False): ("m", "k"),
    (False, True): ("m", "n"),
    (True, True): ("m", "n", "k"),
}


def pad_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _padded(sizes: dict[str, int], multiples: dict[str, int]) -> dict[str, int]:
    """The sizes with each named one rounded up to its multiple."""
    return {name: pad_to(v, multiples[name]) if name in multiples else v for name, v in sizes.items()}


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The padded dimensions, as a result's `padding` records them (name -> padded size)."""
    return {name: v for name, v in after.items() if v != before[name]}


def gemm_shape(m: int, n: int, k: int, a_t: bool, b_t: bool, precision: Precision) -> dict[str, int]:
    """(m, n, k) as DeepBench handed them to cuBLAS in this precision."""
    sizes = {"m": m, "n": n, "k": k}
    if precision is Precision.INT8:
        return _padded(sizes, {"m": INT8_GEMM_M_MULTIPLE})
    multiple = TENSOR_CORE_MULTIPLE.get(precision)
    if multiple is None:
        return sizes
    return _padded(sizes, dict.fromkeys(GEMM_PADDED_DIMS[a_t, b_t], multiple))


def structured_sparse_shape(m: int, n: int, k: int, element_bytes: int) -> dict[str, int]:
    """(m, n, k) as cuSPARSELt takes a 2:4 sparse A (m x k) times a dense B (k x n): m and k to the
    structured operand's multiple, n to the dense operands' (module docstring); the same in every
    layout, since each dimension belongs to a structured or a dense matrix whatever its order."""
    structured = STRUCTURED_OPERAND_BYTES // element_bytes
    dense = DENSE_OPERAND_BYTES // element_bytes
    return _padded({"m": m, "n": n, "k": k}, {"m": structured, "n": dense, "k": structured})


def conv_shape(n: int, c: int, h: int, w: int, k: int, precision: Precision) -> dict[str, int]:
    """(n, c, h, w, k) as DeepBench handed them to cuDNN in this precision (filter size, padding
    and strides are never changed)."""
    sizes = {"n": n, "c": c, "h": h, "w": w, "k": k}
    if precision is Precision.INT8:
        spatial = _padded(sizes, dict.fromkeys(("c", "h", "w"), CONV_INT8_SPATIAL_MULTIPLE))
        return _padded(spatial, {"c": CONV_INT8_CHANNEL_MULTIPLE, "k": CONV_INT8_CHANNEL_MULTIPLE})
    multiple = TENSOR_CORE_MULTIPLE.get(precision)
    if multiple is None:
        return sizes
    # conv_bench.cu padded half channels to 8; the other tensor-core types to their 16 bytes.
    channels = CONV_HALF_CHANNEL_MULTIPLE if precision in (Precision.FP16, Precision.BF16) else multiple
    return _padded(sizes, {"c": channels, "k": channels})


def resolve(mode: PadMode | str, sizes: dict[str, int], padded: dict[str, int]) -> dict[str, int]:
    """The shape to run under `mode` (`both` runs the padded one first)."""
    return dict(sizes) if PadMode(mode) is PadMode.NONE else padded
