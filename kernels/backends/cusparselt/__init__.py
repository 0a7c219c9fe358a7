"""cuSPARSELt called directly, through nvmath-python's bindings: 2:4 structured sparsity.

Not one of DeepBench's benchmarks: DeepBench's sparse GEMMs were unstructured (90-95% zeros,
cuSPARSE), a sparsity no tensor core accelerates. Today's sparse tensor cores take 2:4 sparsity
(two zeros in every four consecutive values along k) through cuSPARSELt; this backend times
`cusparseLtMatmul` on DeepBench's sparse GEMM shapes (suite `sparse-2of4`, structured.py) and the
dense `cublasGemmEx` of the same shape beside it (dense_beside.py), so each result carries the
speedup that the structured sparsity buys."""
