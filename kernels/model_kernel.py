"""The whole-model run (issue 9's model level): one forward pass of a registered model, timed as
one call, beside the operators of the same model's suite, so a report can set the whole model's
time against the sum of its operators' times (what fusion, scheduling and framework overhead
change).

The kernel carries what the host knows without torch: the model's registered name, the batch and
sequence length, its parameter count and the forward FLOPs of its operator dataset (matrix work
only, kernels/models/dataset.py's convention), so the harness never re-extracts. The fewest bytes
are the weights read once in the precision (activations are left out: they depend on how the
runtime fuses, which is what is being measured).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final, Literal

from pydantic import Field

from .kernel import Kernel
from .op_traits import InfoColumn, OpTraits, Tolerance
from .precision import INPUT_BYTES, Precision

if TYPE_CHECKING:
    from .models.dataset import OperatorDataset

MODEL_OP = "model"
MODEL_TITLE = "Whole model (inference forward pass)"
MODEL_SET: Final = "model"

# Relative Frobenius-norm error of a whole model's output against a float64 forward of the same
# weights and input, per precision. Looser than one operator's TOLERANCE (kernels/precision.py):
# rounding accumulates over 12-50 layers, normalizations and residual sums. Measured on the CPU
# (torch 2.13, batch 1-2, seed 0): fp32 <= 5e-7; fp16 2e-4 (DenseNet-121) to 1.3e-3 (BERT-base);
# bf16 2e-3 (ResNet-50, VGG-16, DenseNet-121, LSTM LM, Llama layer) to 1.1e-2 (BERT-base);
# onnxruntime fp32 <= 5.5e-7, fp16 2e-4 (ResNet-50) and 1e-3 (BERT-base). The limits leave a
# margin of about 5x (bf16) to 15x (fp16) over the worst measured case for the GPU's
# other algorithms (cuDNN's Winograd/FFT in fp32, TF32's 10-bit mantissa) while a wrong operator
# (error of order 1) or a NaN still fails.
MODEL_TOLERANCE: dict[Precision, float] = {
    Precision.FP32: 1e-3,
    Precision.TF32: 2e-2,
    Precision.FP16: 2e-2,
    Precision.BF16: 5e-2,
}


class ModelKernel(Kernel):
    """One inference forward pass of a registered model (kernels/models.MODELS) at a batch size
    (and sequence length for language models), random weights from the run's seed."""

    FIELDS: ClassVar[tuple[str, ...]] = ("model", "batch", "seq", "parameters", "fwd_flops")
    # Timed as one call beside its operators: not an operator type; checked by the whole-model bound.
    TRAITS: ClassVar[OpTraits | None] = OpTraits(
        MODEL_TITLE,
        composite=True,
        tolerance=Tolerance.WHOLE_MODEL,
        run_columns=(InfoColumn("items/s", ("throughput_per_s",), digits=1),),
    )
    op: Literal["model"] = "model"
    model: str = Field(description="registered model name (kernels/models.MODELS)")
    batch: int = Field(gt=0)
    seq: int | None = Field(None, gt=0, description="sequence length (language models); None for images")
    parameters: int = Field(ge=0, description="the model's parameter count (shared weights once)")
    fwd_flops: int = Field(ge=0, description="FLOPs of one forward pass: the operator dataset's total")

    def flops(self, direction: str = "fwd") -> float:
        return float(self.fwd_flops)

    def min_bytes(self, direction: str, precision: Precision) -> float:
        """The weights, read once in the precision."""
        return float(self.parameters * INPUT_BYTES[precision])


def whole_model_kernel(ds: OperatorDataset) -> ModelKernel | None:
    """The whole-model kernel for a dataset whose model is registered (it has a builder); None
    for a dataset file of a model this tool cannot build."""
    from .models import MODELS

    if ds.model not in MODELS:
        return None
    return ModelKernel(
        set=MODEL_SET,
        index=0,
        application=ds.model,
        count=1,
        model=ds.model,
        batch=ds.batch,
        seq=ds.seq,
        parameters=ds.parameters,
        fwd_flops=round(ds.total_flops()),
    )
