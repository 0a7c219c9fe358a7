"""cuSPARSE called directly, through nvmath-python's bindings: DeepBench's sparse GEMMs.

DeepBench's `sparse_bench.cu` multiplied a CSR matrix A (m x k, at the kernel's sparsity) by a
dense column-major B (k x n) with cuSPARSE (csrmv for n = 1, csrmm otherwise) and timed
`cublasSgemm` of the same shape beside it, reporting the speedup. Those routines are gone from
cuSPARSE 12; their successors are the generic SpMV and SpMM, which this backend calls with the
same operands (spmm.py). The dense time comes from the cuBLAS backend's DeepBench call
(dense_beside.py)."""
