"""Whole-model inference through PyTorch (issue 9's model level): one forward pass of a registered
model (kernels/models) as one timed call, beside the suite's operators.

The model runs eagerly under torch.inference_mode on the backend's device, in fp32, fp16 or bf16
(tf32: fp32 storage with the tensor-core mode, CUDA only). On CUDA the part is capturable, so the
shared timer replays it in a CUDA graph as it does every operator: whole model and operator sum
are then timed alike, without Python's launch overhead (the timer falls back to eager events,
and says so, where capture fails). On a CPU each call is a plain eager call, overhead included.
"""

from __future__ import annotations

import torch

from ...model_kernel import MODEL_TOLERANCE, ModelKernel
from ...models import instance
from ...precision import Precision
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from ..contract.model_info import ModelRunInfo
from ..shared.torch_context import TorchContext

DTYPES = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
}
assert set(DTYPES) == set(MODEL_TOLERANCE)


def prepare(ctx: TorchContext, kernel: ModelKernel, precision: Precision) -> Prepared:
    if precision not in DTYPES:
        raise Unsupported(
            f"a whole model in {precision.value} needs a quantized model (calibrated scales, quantized "
            "layers), which this tool does not build; the torch backend runs whole models in fp32, "
            "tf32 (CUDA), fp16 or bf16"
        )
    dtype = DTYPES[precision]
    model = instance.build(kernel, ctx.seed).to(device=ctx.device, dtype=dtype)
    x = instance.model_input(kernel, model, ctx.seed, ctx.device, dtype)
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        with torch.inference_mode():
            out["y"] = model(x)

    def check() -> Check:
        ctx.synchronize()
        error = instance.relative_error(out["y"], instance.reference(model, x))
        return instance.verdict(error, precision, f"float64 forward of the same weights and input on {ctx.device.type}")

    info = {
        "runtime": f"torch {torch.__version__} eager, torch.inference_mode",
        "device": str(ctx.device),
        "parameters": instance.parameter_count(model),
        "batch": kernel.batch,
        "seq": kernel.seq,
        "input": tuple(x.shape),
        "weights": "PyTorch default initialisation, seeded",
    }
    part = TimedPart(
        "fwd", run, check, kernel.flops("fwd"), kernel.min_bytes("fwd", precision), info=info, capturable=True
    )
    return Prepared(parts=[part], info=ModelRunInfo.of_batch(kernel.batch))
