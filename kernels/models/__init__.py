"""Real models as operator datasets (issue 9): definitions, extraction, and suites.

The registry below needs no torch (the host lists models without it); the definitions
(`vision`, `language`) and the extraction (`extract`) import torch when used. Every definition
is written here in plain PyTorch from its published configuration (cited per model): torchvision
has no build for torch 2.13 CPU on this registry, and writing the transformers from their
configurations keeps the captured operators independent of `transformers`' version-dependent
attention dispatch and keeps the images free of it. Weights are never created: models are built
on the meta device, where tensors have shapes and no storage.

The whole-model runs are the exception: a model suite ends with the model itself as one kernel
(op "model", kernels/model_kernel.py), which the backends build with seeded random weights
(`instance`: model, input, float64 reference) and time as one forward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Literal

# What extracting a model's operators (extract.py: the model built on PyTorch's meta device) needs.
EXTRACTION_NEEDS = "PyTorch: pip install 'deepbench[torch]'"
IMAGE_SIZE = 224  # ImageNet's evaluation crop, which the published FLOP counts use


@dataclass(frozen=True)
class ModelInfo:
    name: str
    input: Literal["image", "tokens", "hidden"]
    builder: str  # "module:function" under deepbench.kernels.models
    source: str
    default_seq: int | None = None

    def build(self) -> Callable:
        module, func = self.builder.split(":")
        return getattr(import_module(f"{__name__}.{module}"), func)


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo(
            "resnet50",
            "image",
            "vision:resnet50",
            "He et al. 2016 (arXiv:1512.03385) Table 1, 50-layer; v1.5 stride on the 3x3 conv as in "
            "torchvision/NVIDIA; plain PyTorch here",
        ),
        ModelInfo(
            "vgg16",
            "image",
            "vision:vgg16",
            "Simonyan & Zisserman 2015 (arXiv:1409.1556) Table 1, configuration D; plain PyTorch here",
        ),
        ModelInfo(
            "densenet121",
            "image",
            "vision:densenet121",
            "Huang et al. 2017 (arXiv:1608.06993) Table 1, DenseNet-BC-121 (k=32); plain PyTorch here",
        ),
        ModelInfo(
            "lstm-lm",
            "tokens",
            "language:lstm_lm",
            "Zaremba et al. 2014 (arXiv:1409.2329) medium LSTM LM: 2 layers x 650, vocab 10k, 35 steps; torch.nn.LSTM",
            default_seq=35,
        ),
        ModelInfo(
            "bert-base",
            "tokens",
            "language:bert_base",
            "Devlin et al. 2019 (arXiv:1810.04805) BERT-base: 12 layers, hidden 768, 12 heads, FFN 3072, "
            "vocab 30522; plain PyTorch here",
            default_seq=128,
        ),
        ModelInfo(
            "gpt2",
            "tokens",
            "language:gpt2",
            "Radford et al. 2019, GPT-2 small (OpenAI's released config: 12 layers, n_embd 768, 12 heads, "
            "vocab 50257, tied LM head); plain PyTorch here",
            default_seq=128,
        ),
        ModelInfo(
            "llama3-8b-layer",
            "hidden",
            "language:llama3_8b_layer",
            "Meta Llama 3 8B config (hidden 4096, FFN 14336 SwiGLU, 32 heads, 8 KV heads, RMSNorm, RoPE "
            "theta 500000): one decoder layer; plain PyTorch here",
            default_seq=128,
        ),
    )
}
