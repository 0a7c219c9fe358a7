"""Single-operator TFLite models written at run time, without TensorFlow.

A .tflite file is a FlatBuffer of the TFLite schema. LiteRT ships that schema's flatc-generated
Python with the object API (`ai_edge_litert.schema_py_generated`: ModelT, TensorT, OperatorT,
FullyConnectedOptionsT, ... each with a `Pack`) and the serializer TensorFlow's own model tools
use (`ai_edge_litert.tools.flatbuffer_utils.convert_object_to_bytearray`). The model is built
from those objects: the schema comes from the same wheel as the interpreter that runs it, so
the two cannot drift apart, and nothing here writes offsets or vtables by hand. (The `tflite`
PyPI package has the schema's builder functions only, no object API, and tflite-runtime ships
no schema at all.) What stays here is the small part no library does: saying which tensors,
constants and operator one benchmark model holds (`ModelSpec`).

`build` returns the bytes that `ai_edge_litert.interpreter.Interpreter(model_content=...)`
loads. `tests/test_tflite_backend.py` checks the generator against the runtime."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools.flatbuffer_utils import convert_object_to_bytearray

SCHEMA_VERSION = 3
NO_TENSOR = -1  # an omitted optional operator input
TENSOR_TYPES = {
    np.dtype(np.float32): schema.TensorType.FLOAT32,
    np.dtype(np.int8): schema.TensorType.INT8,
    np.dtype(np.int32): schema.TensorType.INT32,
}
# OperatorCode.deprecated_builtin_code is an int8: codes above 127 go in builtin_code only.
PLACEHOLDER_FOR_GREATER_OP_CODES = 127
OPTIONS_SUFFIX = "T"  # the object API's class for the table FooOptions is FooOptionsT


@dataclass
class Quant:
    """Affine quantization: real = scale * (q - zero_point); per channel along `axis` when
    `scale` has several entries."""

    scale: Sequence[float]
    zero_point: Sequence[int]
    axis: int = 0


@dataclass
class CsrSparsity:
    """A 2-D constant stored as CSR (dimension 0 dense, dimension 1 SPARSE_CSR): only the
    non-zero values are in the buffer."""

    rows: int
    row_ptr: np.ndarray  # int32, rows + 1
    col_idx: np.ndarray  # int32, nnz


@dataclass
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: Any
    data: np.ndarray | None = None  # constant data (raw bytes of this array), None for activations
    quant: Quant | None = None
    variable: bool = False
    sparsity: CsrSparsity | None = None


@dataclass
class OpSpec:
    builtin: int  # schema.BuiltinOperator value
    inputs: list[int]  # tensor indices, NO_TENSOR for omitted optional inputs
    outputs: list[int]
    options: Any = None  # an options object of the schema (e.g. schema.FullyConnectedOptionsT()), or None
    version: int = 1


@dataclass
class ModelSpec:
    tensors: list[TensorSpec]
    op: OpSpec
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)


def options_type(options: Any) -> int:
    """The BuiltinOptions union tag of an options object (FullyConnectedOptionsT ->
    BuiltinOptions.FullyConnectedOptions); NONE without options."""
    if options is None:
        return schema.BuiltinOptions.NONE
    return getattr(schema.BuiltinOptions, type(options).__name__.removesuffix(OPTIONS_SUFFIX))


def _int32_vector(values: np.ndarray) -> Any:
    return schema.Int32VectorT(values=np.ascontiguousarray(values, dtype=np.int32))


def _sparsity(sp: CsrSparsity, cols: int) -> Any:
    dense = schema.DimensionMetadataT(format=schema.DimensionType.DENSE, denseSize=sp.rows)
    csr = schema.DimensionMetadataT(
        format=schema.DimensionType.SPARSE_CSR,
        denseSize=cols,
        arraySegmentsType=schema.SparseIndexVector.Int32Vector,
        arraySegments=_int32_vector(sp.row_ptr),
        arrayIndicesType=schema.SparseIndexVector.Int32Vector,
        arrayIndices=_int32_vector(sp.col_idx),
    )
    return schema.SparsityParametersT(traversalOrder=[0, 1], dimMetadata=[dense, csr])


def _tensor(t: TensorSpec, buffer: int) -> Any:
    quant = None
    if t.quant is not None:
        quant = schema.QuantizationParametersT(
            scale=[float(s) for s in t.quant.scale],
            zeroPoint=[int(z) for z in t.quant.zero_point],
            quantizedDimension=t.quant.axis,
        )
    return schema.TensorT(
        shape=[int(d) for d in t.shape],
        type=TENSOR_TYPES[np.dtype(t.dtype)],
        buffer=buffer,
        name=t.name,
        quantization=quant,
        isVariable=t.variable,
        sparsity=_sparsity(t.sparsity, t.shape[1]) if t.sparsity else None,
    )


def build(spec: ModelSpec) -> bytes:
    """The model's FlatBuffer bytes (file identifier TFL3)."""
    buffers = [schema.BufferT()]  # buffer 0 is the empty sentinel; each constant gets its own after it
    tensors = []
    for t in spec.tensors:
        buffer = 0
        if t.data is not None:
            buffers.append(schema.BufferT(data=np.frombuffer(np.ascontiguousarray(t.data).tobytes(), np.uint8)))
            buffer = len(buffers) - 1
        tensors.append(_tensor(t, buffer))
    op = spec.op
    operator = schema.OperatorT(
        opcodeIndex=0,
        inputs=list(op.inputs),
        outputs=list(op.outputs),
        builtinOptionsType=options_type(op.options),
        builtinOptions=op.options,
    )
    subgraph = schema.SubGraphT(
        tensors=tensors, inputs=list(spec.inputs), outputs=list(spec.outputs), operators=[operator], name="main"
    )
    code = schema.OperatorCodeT(
        deprecatedBuiltinCode=min(op.builtin, PLACEHOLDER_FOR_GREATER_OP_CODES),
        builtinCode=op.builtin,
        version=op.version,
    )
    model = schema.ModelT(
        version=SCHEMA_VERSION,
        operatorCodes=[code],
        subgraphs=[subgraph],
        description="deepbench single-operator model",
        buffers=buffers,
    )
    return bytes(convert_object_to_bytearray(model))
