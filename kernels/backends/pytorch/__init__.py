"""The PyTorch backend: one backend for the native libraries PyTorch calls on its device
(MKL and oneDNN on an x86 CPU; oneDNN with the Arm Compute Library and OpenBLAS on an ARM CPU,
arm_cpu.py; cuBLAS/cuBLASLt, cuDNN and cuSPARSE on an NVIDIA GPU; the ROCm libraries on an AMD
GPU). One module per operation; this class dispatches and times."""
