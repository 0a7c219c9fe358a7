"""The mkl backend: Intel's MKL called directly, as DeepBench's Intel benchmarks called it (code/intel/gemm's
cblas GEMMs with their padded leading dimensions, direct or packed; code/intel/spmm's inspector-executor sparse
product), through ctypes over the `mkl` wheel's libmkl_rt, on numpy arrays, timed by the host clock."""
