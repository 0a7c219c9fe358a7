"""What the cublas backend declares (backends/contract/declaration.py), importable without the library:
the precisions it covers, with the library's types for each (gemm.py calls it with them)."""

from __future__ import annotations

from ...precision import Precision
from ..contract.declaration import BackendDeclaration, NoOptions
from ..gpu.cuda.packages import INSTALL_HINT

# precision -> (A/B type, C type, compute type): cudaDataType_t and cublasComputeType_t names, as
# the result records them. fp16 accumulates in fp32 (DeepBench's stated 32-bit accumulate minimum);
# fp16acc16 is the call DeepBench's gemm_bench.cu made for half, fp16 compute (gemm.py's doc).
CALLS: dict[Precision, tuple[str, str, str]] = {
    Precision.FP32: ("CUDA_R_32F", "CUDA_R_32F", "COMPUTE_32F"),
    Precision.TF32: ("CUDA_R_32F", "CUDA_R_32F", "COMPUTE_32F_FAST_TF32"),
    Precision.FP16: ("CUDA_R_16F", "CUDA_R_16F", "COMPUTE_32F"),
    Precision.FP16ACC16: ("CUDA_R_16F", "CUDA_R_16F", "COMPUTE_16F"),
    Precision.BF16: ("CUDA_R_16BF", "CUDA_R_16BF", "COMPUTE_32F"),
    Precision.INT8: ("CUDA_R_8I", "CUDA_R_32I", "COMPUTE_32I"),
}


# The handle's math mode per precision (cublasMath_t flag names, or-ed). 32-bit accumulate means
# 32-bit all the way: no split-K reduction of partial sums in fp16/bf16, which cuBLAS's default math
# allows (PyTorch forbids it the same way). fp16acc16 is reduced precision by definition, so its
# handle keeps cuBLAS's default math (tensor cores allowed: what DeepBench's CUBLAS_TENSOR_OP_MATH
# asked for, deprecated since CUDA 11, where the default allows them), with nothing forbidden.
STRICT_MATH = ("DEFAULT_MATH", "DISALLOW_REDUCED_PRECISION_REDUCTION")
MATH_MODES: dict[Precision, tuple[str, ...]] = dict.fromkeys(CALLS, STRICT_MATH) | {
    Precision.FP16ACC16: ("DEFAULT_MATH",)
}


class CublasDeclaration(BackendDeclaration[NoOptions]):
    precisions = CALLS
    libraries = ("cuBLAS", "cuBLASLt")
    install_hint = INSTALL_HINT


CUBLAS = CublasDeclaration("cublas", NoOptions)
