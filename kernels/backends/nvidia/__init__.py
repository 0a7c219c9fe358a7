"""The NVIDIA platform's backend: for each kernel, NVIDIA's own library where a native backend
covers the operation and precision, PyTorch otherwise.

GEMM goes to cuBLAS (cublas/), convolution to cuDNN's graph API (cudnn/), sparse GEMM to
cuSPARSE (cusparse/), 2:4 structured sparse GEMM to cuSPARSELt (cusparselt/); recurrent layers,
layers, whole models and all-reduce stay on PyTorch (which calls cuDNN's RNN, cuBLAS and NCCL
itself). Every result names the backend that made it (`backend`) and the exact call
(`blas_call`, the cuDNN engine). Where a native binding is not installed the kernel runs on
PyTorch and its result says why (`native_unavailable`), so a machine without nvmath-python still
measures, and says it measured another way. `--backend` forces one library for every kernel
instead (e.g. `--backend torch` as a cross-check)"""
