"""A registered model with real (random) weights, its input and its float64 reference, for the
whole-model runs (kernels/model_kernel.py) of every backend that runs them.

Weights come from PyTorch's default initialisation under the run's seed, drawn on the CPU in
float32 with the global generator forked (nothing else in the process is disturbed), so the torch
and onnxruntime backends time the same weights. Batch normalization keeps its initial running
statistics (mean 0, variance 1): with the default initialisation every model's output is finite
and of moderate size, so its relative error is well defined (the errors measured on every model
are listed beside MODEL_TOLERANCE).

The check compares the output with a float64 forward of the same model: the weights and input in
the run's precision, upcast, so the error is the arithmetic's (rounding accumulated over the
model's depth), not the weights' rounding. MODEL_TOLERANCE (kernels/model_kernel.py) says how much
a whole model may accumulate.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from ..backends.contract.base import Unsupported
from ..model_kernel import MODEL_TOLERANCE, ModelKernel
from ..precision import Precision
from ..results import Check
from . import MODELS
from .extract import example_input

INPUT_SEED_OFFSET = 1  # the input's generator: seed + 1, so input and weights never share a stream


def build(kernel: ModelKernel, seed: int) -> nn.Module:
    """The model in float32 on the CPU, eval mode, default initialisation under `seed`."""
    if kernel.model not in MODELS:
        raise Unsupported(f"'{kernel.model}' is not a model this tool can build (choose from: {', '.join(MODELS)})")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MODELS[kernel.model].build()()
    return model.eval()


def vocabulary(model: nn.Module) -> int:
    """Token ids are drawn below the first embedding table's size (the word/token table: every
    language model here registers it first)."""
    table = next((m for m in model.modules() if isinstance(m, nn.Embedding)), None)
    if table is None:
        raise Unsupported("this language model has no embedding table to draw token ids from")
    return table.num_embeddings


def model_input(
    kernel: ModelKernel, model: nn.Module, seed: int, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """Images (batch x 3 x 224 x 224) or hidden states: standard normal in `dtype`; token ids:
    uniform over the vocabulary (int64)."""
    info = MODELS[kernel.model]
    shape = tuple(example_input(info, kernel.batch, kernel.seq).shape)
    positions = getattr(model, "positions", None)
    if isinstance(positions, nn.Embedding) and kernel.seq and kernel.seq > positions.num_embeddings:
        raise Unsupported(f"{kernel.model} has {positions.num_embeddings} positions; --seq {kernel.seq} exceeds them")
    gen = torch.Generator(device="cpu").manual_seed(seed + INPUT_SEED_OFFSET)
    if info.input == "tokens":
        x = torch.randint(0, vocabulary(model), shape, generator=gen, dtype=torch.long)
    else:
        x = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    return x.to(device)


def reference(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The output of a float64 copy of `model` (weights as they are, upcast) on `x` upcast."""
    ref_model = copy.deepcopy(model).double()
    with torch.inference_mode():
        out = ref_model(x.double() if x.is_floating_point() else x)
    del ref_model
    return out


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref||_F / ||ref||_F in float64; NaN when the output holds NaN or Inf."""
    out64, ref64 = out.detach().to(torch.float64), ref.detach().to(torch.float64, copy=False)
    if out64.shape != ref64.shape:
        raise ValueError(f"output shape {tuple(out64.shape)} differs from the reference's {tuple(ref64.shape)}")
    if not bool(torch.isfinite(out64).all()):
        return math.nan
    denom = torch.linalg.vector_norm(ref64).item()
    num = torch.linalg.vector_norm(out64 - ref64.to(out64.device)).item()
    return num / denom if denom > 0 else num


def verdict(error: float, precision: Precision, detail: str = "") -> Check:
    """Pass when finite and within the whole-model tolerance of the precision (NaN never passes)."""
    tol = MODEL_TOLERANCE[precision]
    finite = math.isfinite(error)
    return Check(
        passed=finite and error <= tol,
        method="reference-fp64-model",
        error=error if finite else None,
        tolerance=tol,
        detail=detail if finite else f"{detail} non-finite output".strip(),
    )


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
