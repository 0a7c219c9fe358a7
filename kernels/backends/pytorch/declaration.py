"""What the torch backend declares, importable without torch: it serves every platform (each
platform's own backend, where it has one, is preferred), and what its results are held to on a GPU,
where PyTorch runs cuDNN's recurrent layers (rnn_cudnn.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ...kernel import Kernel
from ..contract.declaration import BackendDeclaration, NoOptions

# PyTorch runs on every platform's device: the fallback preference wherever a native backend is declared.
EVERYWHERE = {"cpu": 1, "intel": 1, "nvidia": 1, "amd": 1, "arm": 1}
GPU = "cuda"  # PyTorch's device name for NVIDIA and AMD GPUs alike
INFERENCE_SETS = ("inference",)  # DeepBench's inference_server and inference_device


class TorchDeclaration(BackendDeclaration[NoOptions]):
    libraries = ("PyTorch",)
    platforms: ClassVar[Mapping[str, int]] = EVERYWHERE
    # Several ranks: torch.distributed's process group for the device (NCCL, RCCL under ROCm; gloo on CPUs).
    ranked_collectives: ClassVar[Mapping[str, str]] = {GPU: "nccl", "cpu": "gloo"}
    install_hint = "pip install 'deepbench[torch]'"
    ceilings_on = "GPUs and CPUs"  # a large GEMM per precision and a copy (cpu_ceilings.py, gpu/cuda/facts.py)

    def counts_input_projection(self, device: str) -> bool:
        """On a GPU the recurrent layers are cuDNN's (rnn_cudnn.py), which cannot leave the input
        projection out; PyTorch's own recurrence on a CPU (rnn.py) leaves it out, as DeepBench did."""
        return device.startswith(GPU)

    def optional_backward(self, kernel: Kernel, device: str) -> bool:
        """On a GPU an inference set's RNN runs its forward in inference mode only (rnn_cudnn.py)."""
        return kernel.op == "rnn" and kernel.set.startswith(INFERENCE_SETS) and device.startswith(GPU)


TORCH = TorchDeclaration("torch", NoOptions)
