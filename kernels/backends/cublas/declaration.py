"""What the cublas backend declares (backends/declaration.py), importable without the library:
the precisions it covers, with the library's types for each (gemm.py calls it with them)."""

from __future__ import annotations

from ...precision import Precision
from ..declaration import BackendDeclaration, NoOptions

# precision -> (A/B type, C type, compute type): cudaDataType_t and cublasComputeType_t names, as
# the result records them; DeepBench's half GEMM asked for fp16 compute, fp32 here (gemm.py's doc).
CALLS: dict[Precision, tuple[str, str, str]] = {
    Precision.FP32: ("CUDA_R_32F", "CUDA_R_32F", "COMPUTE_32F"),
    Precision.TF32: ("CUDA_R_32F", "CUDA_R_32F", "COMPUTE_32F_FAST_TF32"),
    Precision.FP16: ("CUDA_R_16F", "CUDA_R_16F", "COMPUTE_32F"),
    Precision.BF16: ("CUDA_R_16BF", "CUDA_R_16BF", "COMPUTE_32F"),
    Precision.INT8: ("CUDA_R_8I", "CUDA_R_32I", "COMPUTE_32I"),
}


class CublasDeclaration(BackendDeclaration[NoOptions]):
    precisions = CALLS


CUBLAS = CublasDeclaration("cublas", NoOptions)
