"""One onnxruntime session per single-operator model, and its pre-bound call.

The model is built at run time with the `onnx` helper API (no files, no exporter). Weights are
initializers (constants, as in an inference model: the runtime may prepack them once at load);
the activations are bound once with io_binding to numpy buffers, and the output is bound to a
pre-allocated numpy array, so the timed call is `run_with_iobinding` alone: no allocation, no
copy in or out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

OPSET = 17
IR_VERSION = 8
ONNX_TYPES = {
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
    np.dtype(np.int8): onnx.TensorProto.INT8,
    np.dtype(np.uint8): onnx.TensorProto.UINT8,
    np.dtype(np.int32): onnx.TensorProto.INT32,
    np.dtype(np.int64): onnx.TensorProto.INT64,
}


@dataclass
class SessionOptions:
    threads: int  # intra-op threads; 0 lets onnxruntime choose (one per physical core)
    provider: str


def single_op_model(
    node: onnx.NodeProto | Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
    initializers: dict[str, np.ndarray],
    opset: int = OPSET,
) -> bytes:
    """A checked model with one node (or the few nodes of one layer that ONNX has no single
    operator for): `inputs` are graph inputs (bound at run time), `outputs` pre-allocated arrays
    whose shapes and types the graph declares, `initializers` constants. `opset` above OPSET is
    for operators added later (Gelu 20, RMSNormalization and Attention 23); the IR version is the
    lowest that opset allows, so older runtimes load what they can."""
    nodes = [node] if isinstance(node, onnx.NodeProto) else list(node)
    graph = helper.make_graph(
        nodes,
        f"deepbench_{nodes[-1].op_type.lower()}",
        [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype], list(a.shape)) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype], list(a.shape)) for n, a in outputs.items()],
        [onnx.numpy_helper.from_array(a, n) for n, a in initializers.items()],
    )
    opset_id = helper.make_opsetid("", opset)
    model = helper.make_model(graph, opset_imports=[opset_id], producer_name="deepbench")
    model.ir_version = IR_VERSION if opset == OPSET else helper.find_min_ir_version_for([opset_id])
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


class BoundCall:
    """session + io_binding: `__call__` runs the model on the bound buffers."""

    def __init__(
        self, model: bytes, options: SessionOptions, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]
    ) -> None:
        so = ort.SessionOptions()
        so.intra_op_num_threads = options.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(model, sess_options=so, providers=[options.provider])
        self.providers: Sequence[str] = self.session.get_providers()
        self.binding = self.session.io_binding()
        self.keep = (inputs, outputs)  # the bound buffers must outlive the binding
        for name, arr in inputs.items():
            self.binding.bind_cpu_input(name, arr)
        for name, arr in outputs.items():
            if not arr.flags.c_contiguous:
                raise ValueError(f"output {name} must be contiguous")
            self.binding.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)
