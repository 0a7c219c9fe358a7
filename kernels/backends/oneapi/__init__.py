"""The oneapi backend: the Intel platform's own libraries called directly, each operation on the backend of
its library (GEMM and sparse GEMM on MKL, convolutions, recurrent layers and batched GEMM on oneDNN), and
what neither runs (layers, whole models, all-reduce) on PyTorch, whose result says why; the router of
shared/router.py over Intel's backends, as the nvidia backend is over NVIDIA's. A machine without Intel's
wheels still measures every kernel, on PyTorch, and says so (`native_unavailable`)."""
