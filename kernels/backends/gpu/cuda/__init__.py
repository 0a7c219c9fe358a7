"""The CUDA implementation of the GPU layer: the run's device (device.py), its facts, versions and measured
ceilings (facts.py), the base of the backends that call an NVIDIA library directly (native.py), and the fp8
GEMM that the PyTorch and cuBLAS backends both run (fp8_gemm.py)."""
