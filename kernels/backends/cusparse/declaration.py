"""What the cusparse backend declares (backends/contract/declaration.py), importable without the library:
the precisions it covers, with the library's types for each (spmm.py calls it with them)."""

from __future__ import annotations

from ...precision import Precision
from ..contract.declaration import BackendDeclaration, NoOptions
from ..gpu.cuda.packages import INSTALL_HINT

# Value and compute types (cudaDataType_t names) per precision: 16-bit types accumulate in fp32,
# as DeepBench's training rule asks of them.
TYPES = {
    Precision.FP32: ("CUDA_R_32F", "CUDA_R_32F"),
    Precision.FP16: ("CUDA_R_16F", "CUDA_R_32F"),
    Precision.BF16: ("CUDA_R_16BF", "CUDA_R_32F"),
}


class CusparseDeclaration(BackendDeclaration[NoOptions]):
    precisions = TYPES
    libraries = ("cuSPARSE",)
    install_hint = INSTALL_HINT
    # DeepBench's sparse_bench.cu timed cuBLAS's dense GEMM of the same shape beside each sparse product.
    dense_backend = "cublas"


CUSPARSE = CusparseDeclaration("cusparse", NoOptions)
