"""cuBLAS called directly, through nvmath-python's bindings: DeepBench's own GEMM call.

DeepBench's `gemm_bench` calls `cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, lda, B,
ldb, beta, C, ldc, compute type, algo)` on column-major operands. This backend makes that very
call (`nvmath.bindings.cublas.gemm_ex`), with DeepBench's padding (kernels/padding.py), so the
library receives DeepBench's problem in every precision, int8 at any n included (PyTorch's
`torch._int_mm` needs n > 16 and pads it: another kernel). fp8 goes through cuBLASLt, the only
cuBLAS API that has it (gemm.py says which layouts it accepts)."""
