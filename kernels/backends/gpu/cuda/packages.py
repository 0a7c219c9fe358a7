"""What to install for the backends that call NVIDIA's libraries through their Python bindings: a light
module (no library import), read by those backends' declarations and shown where a binding is missing."""

from __future__ import annotations

# cuSPARSELt's library itself comes with PyTorch's CUDA 13 wheels (nvidia-cusparselt-cu13), and in NVIDIA's images.
INSTALL_HINT = (
    "pip install 'deepbench[nvidia]' (nvmath-python, nvidia-cudnn-frontend; cuSPARSELt: "
    "nvidia-cusparselt-cu13, which PyTorch's CUDA wheels install)"
)
