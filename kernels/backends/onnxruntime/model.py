"""Whole-model inference through onnxruntime (issue 9's model level): the registered model, with
the same seeded weights as the torch backend's, exported by torch.onnx and run as one session on
the backend's execution provider, inputs and output pre-bound (session.BoundCall), so the timed
call is `run_with_iobinding` alone. onnxruntime applies its graph optimizations (ORT_ENABLE_ALL:
constant folding, Conv+BatchNorm folding, Conv+activation and attention/GELU/LayerNorm fusions):
the whole model against the sum of its operators shows what they change.

The exporter is PyTorch's TorchScript-based one (dynamo=False, opset 17): the dynamo exporter
needs onnxscript, which the images do not carry. A model holding an operator that exporter has no
ONNX form for (RMSNorm, as in the Llama layer: RMSNormalization arrived in opset 23) is
`unsupported` with the exporter's message. Exporting needs PyTorch in the process.

fp16 exports the float16 model; where the CPU execution provider has no float16 kernel for a node,
onnxruntime inserts casts and computes that node in float32 (recorded in the part's info).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import TYPE_CHECKING

import numpy as np

from ...model_kernel import ModelKernel
from ...precision import Precision
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from ..contract.model_info import ModelRunInfo
from .context import OrtContext
from .session import BoundCall

if TYPE_CHECKING:
    import torch

EXPORT_OPSET = 17  # the TorchScript exporter's well-trodden opset (ONNX 1.12)
EXPORTER = f"torch.onnx.export (TorchScript-based, dynamo=False), opset {EXPORT_OPSET}"
PRECISIONS = (Precision.FP32, Precision.FP16)
FP16_NOTE = (
    "float16 model; nodes without a float16 kernel on the CPU execution provider run in float32 "
    "between casts that onnxruntime inserts"
)
REASON_CHARS = 600


def prepare(ctx: OrtContext, kernel: ModelKernel, precision: Precision) -> Prepared:
    if precision not in PRECISIONS:
        raise Unsupported(_precision_reason(precision))
    try:
        import torch

        from ...models import instance
    except ImportError:
        raise Unsupported("exporting the model to ONNX needs PyTorch, which this image does not have") from None
    dtype = torch.float32 if precision is Precision.FP32 else torch.float16
    cpu = torch.device("cpu")
    model = instance.build(kernel, ctx.seed).to(dtype=dtype)
    x = instance.model_input(kernel, model, ctx.seed, cpu, dtype)
    ref = instance.reference(model, x)
    onnx_model = export(model, x, kernel.model)
    del model
    inputs = {"x": np.ascontiguousarray(x.numpy())}
    out = {"y": np.empty(tuple(ref.shape), dtype=np.float32 if precision is Precision.FP32 else np.float16)}
    call = BoundCall(onnx_model, ctx.options, inputs, out)

    def check() -> Check:
        error = instance.relative_error(torch.from_numpy(out["y"]), ref)
        return instance.verdict(error, precision, "float64 forward (PyTorch) of the same weights and input")

    info = {
        "runtime": f"onnxruntime {_ort_version()}",
        "exporter": f"{EXPORTER}, torch {torch.__version__}",
        "providers": list(call.providers),
        "graph_optimization": "ORT_ENABLE_ALL",
        "batch": kernel.batch,
        "seq": kernel.seq,
        "input": list(inputs["x"].shape),
        "model_bytes": len(onnx_model),
        "weights": "PyTorch default initialisation, seeded (as the torch backend's)",
    }
    if precision is Precision.FP16:
        info["note"] = FP16_NOTE
    part = TimedPart(
        "fwd", call, check, kernel.flops("fwd"), kernel.min_bytes("fwd", precision), info=info, capturable=False
    )
    return Prepared(parts=[part], info=ModelRunInfo.of_batch(kernel.batch))


def export(model: torch.nn.Module, x: torch.Tensor, name: str) -> bytes:
    """The model as ONNX bytes; an operator the exporter cannot express is `unsupported`. The
    exporter's chatter is kept off the harness's stdout, which carries its JSON events: Python's
    warnings are silenced, and the C++ log (which prints the whole graph at an error, and which
    the exporter switches on whatever it was) goes to stderr, the harness's log."""
    import torch

    to_stderr = getattr(torch._C, "_jit_set_onnx_log_output_stream", None)
    if to_stderr is not None:
        to_stderr("stderr")
    buf = io.BytesIO()
    chatter = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(chatter), torch.no_grad():
            warnings.simplefilter("ignore")
            # a file object is accepted as well as a path; torch's annotation names paths only
            torch.onnx.export(
                model,
                (x,),
                buf,  # type: ignore[arg-type]
                dynamo=False,
                opset_version=EXPORT_OPSET,
                input_names=["x"],
                output_names=["y"],
            )
    except torch.onnx.errors.OnnxExporterError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unsupported(f"{EXPORTER} cannot export {name}: {first}"[:REASON_CHARS]) from None
    return buf.getvalue()


def _precision_reason(precision: Precision) -> str:
    if precision is Precision.BF16:
        why = (
            "ONNX's Conv has no bfloat16 type at opset 17 and the CPU execution provider has no bfloat16 MatMul kernel"
        )
    elif precision is Precision.TF32:
        why = "tf32 is a tensor-core mode of NVIDIA GPUs; the CPU execution provider computes float32"
    else:
        why = (
            f"a whole model in {precision.value} needs a quantized model (calibrated scales), which this tool "
            "does not build"
        )
    return f"{why}; the onnxruntime backend runs whole models in fp32 and fp16"


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__
