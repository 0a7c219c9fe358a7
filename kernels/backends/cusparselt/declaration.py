"""What the cusparselt backend declares (backends/contract/declaration.py), importable without the library:
the precisions it covers, with the library's types for each (structured.py calls it with them)."""

from __future__ import annotations

from ...precision import Precision
from ..contract.declaration import BackendDeclaration, NoOptions
from ..gpu.cuda.packages import INSTALL_HINT

# precision -> (A/B type, C/D type, compute type): cudaDataType_t and cusparseComputeType names as
# results record them; the combinations cuSPARSELt lists for sparse tensor cores (fp8 e4m3 from
# compute capability 9.0, with bf16 output as this tool's fp8 precision defines it).
TYPES: dict[Precision, tuple[str, str, str]] = {
    Precision.FP16: ("CUDA_R_16F", "CUDA_R_16F", "COMPUTE_32F"),
    Precision.BF16: ("CUDA_R_16BF", "CUDA_R_16BF", "COMPUTE_32F"),
    Precision.INT8: ("CUDA_R_8I", "CUDA_R_32I", "COMPUTE_32I"),
    Precision.FP8: ("CUDA_R_8F_E4M3", "CUDA_R_16BF", "COMPUTE_32F"),
}


class CusparseLtDeclaration(BackendDeclaration[NoOptions]):
    precisions = TYPES
    libraries = ("cuSPARSELt",)
    install_hint = INSTALL_HINT
    # DeepBench's sparse_bench.cu timed cuBLAS's dense GEMM of the same shape beside each sparse product.
    dense_backend = "cublas"


CUSPARSELT = CusparseLtDeclaration("cusparselt", NoOptions)
