"""Single-operator TFLite models written at run time, without TensorFlow.

A .tflite file is a FlatBuffer of the TFLite schema (schema.fbs). We write it with the
`flatbuffers` package and the builder functions that the `tflite` PyPI package generated from
that schema with flatc (ModelStart, TensorAddShape, ...): the schema's own generated code, kept
by its maintainers, rather than hand-written offsets that would have to track schema changes.
The schema is forward compatible: fields newer than the runtime are simply not written here.

`ModelSpec` says what the model holds (tensors with optional constant data, quantization and
sparsity, one operator); `build` returns the bytes that tflite_runtime.Interpreter loads with
`model_content=`. `tests/test_tflite_backend.py` checks the generator against the runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import flatbuffers
import numpy as np
import tflite as S

SCHEMA_VERSION = 3
NO_TENSOR = -1  # an omitted optional operator input
TENSOR_TYPES = {np.dtype(np.float32): S.TensorType.FLOAT32, np.dtype(np.int8): S.TensorType.INT8,
                np.dtype(np.int32): S.TensorType.INT32}
# OperatorCode.deprecated_builtin_code is an int8: codes above 127 go in builtin_code only.
PLACEHOLDER_FOR_GREATER_OP_CODES = 127


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
    dtype: np.dtype
    data: np.ndarray | None = None  # constant data (raw bytes of this array), None for activations
    quant: Quant | None = None
    variable: bool = False
    sparsity: CsrSparsity | None = None


@dataclass
class OpSpec:
    builtin: int  # tflite.BuiltinOperator value
    inputs: list[int]  # tensor indices, NO_TENSOR for omitted optional inputs
    outputs: list[int]
    options_type: int  # tflite.BuiltinOptions value
    options: Callable[[flatbuffers.Builder], int]  # writes the options table, returns its offset
    version: int = 1


@dataclass
class ModelSpec:
    tensors: list[TensorSpec]
    op: OpSpec
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)


NUMPY_TYPES = {"PrependInt32": np.int32, "PrependInt64": np.int64, "PrependFloat32": np.float32}


def _vector(b: flatbuffers.Builder, start: Callable[[flatbuffers.Builder, int], None], values: Sequence[int],
            prepend: str = "PrependInt32") -> int:
    if len(values) > 64:  # sparse indices: one numpy copy instead of a Python loop per element
        return b.CreateNumpyVector(np.asarray(values, dtype=NUMPY_TYPES[prepend]))
    start(b, len(values))
    for v in reversed(values):
        getattr(b, prepend)(v)
    return b.EndVector()


def _offsets(b: flatbuffers.Builder, start: Callable[[flatbuffers.Builder, int], None], offs: Sequence[int]) -> int:
    start(b, len(offs))
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _quant(b: flatbuffers.Builder, q: Quant) -> int:
    scale = _vector(b, S.QuantizationParametersStartScaleVector, list(q.scale), "PrependFloat32")
    zp = _vector(b, S.QuantizationParametersStartZeroPointVector, list(q.zero_point), "PrependInt64")
    S.QuantizationParametersStart(b)
    S.QuantizationParametersAddScale(b, scale)
    S.QuantizationParametersAddZeroPoint(b, zp)
    S.QuantizationParametersAddQuantizedDimension(b, q.axis)
    return S.QuantizationParametersEnd(b)


def _int32_vector_table(b: flatbuffers.Builder, values: np.ndarray) -> int:
    vec = _vector(b, S.Int32VectorStartValuesVector, np.asarray(values, dtype=np.int32))
    S.Int32VectorStart(b)
    S.Int32VectorAddValues(b, vec)
    return S.Int32VectorEnd(b)


def _sparsity(b: flatbuffers.Builder, sp: CsrSparsity, cols: int) -> int:
    segments = _int32_vector_table(b, sp.row_ptr)
    indices = _int32_vector_table(b, sp.col_idx)
    S.DimensionMetadataStart(b)
    S.DimensionMetadataAddFormat(b, S.DimensionType.DENSE)
    S.DimensionMetadataAddDenseSize(b, sp.rows)
    dense = S.DimensionMetadataEnd(b)
    S.DimensionMetadataStart(b)
    S.DimensionMetadataAddFormat(b, S.DimensionType.SPARSE_CSR)
    S.DimensionMetadataAddDenseSize(b, cols)
    S.DimensionMetadataAddArraySegmentsType(b, S.SparseIndexVector.Int32Vector)
    S.DimensionMetadataAddArraySegments(b, segments)
    S.DimensionMetadataAddArrayIndicesType(b, S.SparseIndexVector.Int32Vector)
    S.DimensionMetadataAddArrayIndices(b, indices)
    csr = S.DimensionMetadataEnd(b)
    order = _vector(b, S.SparsityParametersStartTraversalOrderVector, [0, 1])
    dims = _offsets(b, S.SparsityParametersStartDimMetadataVector, [dense, csr])
    S.SparsityParametersStart(b)
    S.SparsityParametersAddTraversalOrder(b, order)
    S.SparsityParametersAddDimMetadata(b, dims)
    return S.SparsityParametersEnd(b)


def _buffer(b: flatbuffers.Builder, data: bytes | None) -> int:
    vec = None
    if data:
        b.StartVector(1, len(data), 16)  # 16-byte alignment for SIMD loads of constants
        b.head = b.head - len(data)
        b.Bytes[b.head:b.head + len(data)] = data
        vec = b.EndVector()
    S.BufferStart(b)
    if vec is not None:
        S.BufferAddData(b, vec)
    return S.BufferEnd(b)


def build(spec: ModelSpec) -> bytes:
    """The model's FlatBuffer bytes (file identifier TFL3)."""
    b = flatbuffers.Builder(1024)
    # Buffer 0 is the empty sentinel; every constant tensor gets its own buffer after it.
    buffer_data: list[bytes | None] = [None]
    tensor_offs = []
    for t in spec.tensors:
        buf_index = 0
        if t.data is not None:
            buffer_data.append(np.ascontiguousarray(t.data).tobytes())
            buf_index = len(buffer_data) - 1
        name = b.CreateString(t.name)
        shape = _vector(b, S.TensorStartShapeVector, list(t.shape))
        quant = _quant(b, t.quant) if t.quant else None
        sparsity = _sparsity(b, t.sparsity, t.shape[1]) if t.sparsity else None
        S.TensorStart(b)
        S.TensorAddShape(b, shape)
        S.TensorAddType(b, TENSOR_TYPES[np.dtype(t.dtype)])
        S.TensorAddBuffer(b, buf_index)
        S.TensorAddName(b, name)
        if quant is not None:
            S.TensorAddQuantization(b, quant)
        if sparsity is not None:
            S.TensorAddSparsity(b, sparsity)
        S.TensorAddIsVariable(b, t.variable)
        tensor_offs.append(S.TensorEnd(b))

    op = spec.op
    options = op.options(b)
    op_inputs = _vector(b, S.OperatorStartInputsVector, op.inputs)
    op_outputs = _vector(b, S.OperatorStartOutputsVector, op.outputs)
    S.OperatorStart(b)
    S.OperatorAddOpcodeIndex(b, 0)
    S.OperatorAddInputs(b, op_inputs)
    S.OperatorAddOutputs(b, op_outputs)
    S.OperatorAddBuiltinOptionsType(b, op.options_type)
    S.OperatorAddBuiltinOptions(b, options)
    operator = S.OperatorEnd(b)

    tensors = _offsets(b, S.SubGraphStartTensorsVector, tensor_offs)
    sg_inputs = _vector(b, S.SubGraphStartInputsVector, spec.inputs)
    sg_outputs = _vector(b, S.SubGraphStartOutputsVector, spec.outputs)
    operators = _offsets(b, S.SubGraphStartOperatorsVector, [operator])
    sg_name = b.CreateString("main")
    S.SubGraphStart(b)
    S.SubGraphAddTensors(b, tensors)
    S.SubGraphAddInputs(b, sg_inputs)
    S.SubGraphAddOutputs(b, sg_outputs)
    S.SubGraphAddOperators(b, operators)
    S.SubGraphAddName(b, sg_name)
    subgraph = S.SubGraphEnd(b)

    S.OperatorCodeStart(b)
    S.OperatorCodeAddDeprecatedBuiltinCode(b, min(op.builtin, PLACEHOLDER_FOR_GREATER_OP_CODES))
    S.OperatorCodeAddBuiltinCode(b, op.builtin)
    S.OperatorCodeAddVersion(b, op.version)
    opcode = S.OperatorCodeEnd(b)

    buffers = [_buffer(b, d) for d in buffer_data]
    buffers_vec = _offsets(b, S.ModelStartBuffersVector, buffers)
    subgraphs = _offsets(b, S.ModelStartSubgraphsVector, [subgraph])
    opcodes = _offsets(b, S.ModelStartOperatorCodesVector, [opcode])
    desc = b.CreateString("deepbench single-operator model")
    S.ModelStart(b)
    S.ModelAddVersion(b, SCHEMA_VERSION)
    S.ModelAddOperatorCodes(b, opcodes)
    S.ModelAddSubgraphs(b, subgraphs)
    S.ModelAddDescription(b, desc)
    S.ModelAddBuffers(b, buffers_vec)
    b.Finish(S.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def fully_connected_options(b: flatbuffers.Builder) -> int:
    S.FullyConnectedOptionsStart(b)
    S.FullyConnectedOptionsAddFusedActivationFunction(b, S.ActivationFunctionType.NONE)
    S.FullyConnectedOptionsAddKeepNumDims(b, False)
    return S.FullyConnectedOptionsEnd(b)


def conv2d_options(padding: int, stride_h: int, stride_w: int) -> Callable[[flatbuffers.Builder], int]:
    def write(b: flatbuffers.Builder) -> int:
        S.Conv2DOptionsStart(b)
        S.Conv2DOptionsAddPadding(b, padding)
        S.Conv2DOptionsAddStrideH(b, stride_h)
        S.Conv2DOptionsAddStrideW(b, stride_w)
        S.Conv2DOptionsAddDilationHFactor(b, 1)
        S.Conv2DOptionsAddDilationWFactor(b, 1)
        S.Conv2DOptionsAddFusedActivationFunction(b, S.ActivationFunctionType.NONE)
        return S.Conv2DOptionsEnd(b)
    return write


def sequence_rnn_options(activation: int) -> Callable[[flatbuffers.Builder], int]:
    def write(b: flatbuffers.Builder) -> int:
        S.SequenceRNNOptionsStart(b)
        S.SequenceRNNOptionsAddTimeMajor(b, True)
        S.SequenceRNNOptionsAddFusedActivationFunction(b, activation)
        return S.SequenceRNNOptionsEnd(b)
    return write


def sequence_lstm_options(b: flatbuffers.Builder) -> int:
    S.UnidirectionalSequenceLSTMOptionsStart(b)
    S.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(b, S.ActivationFunctionType.TANH)
    S.UnidirectionalSequenceLSTMOptionsAddCellClip(b, 0.0)
    S.UnidirectionalSequenceLSTMOptionsAddProjClip(b, 0.0)
    S.UnidirectionalSequenceLSTMOptionsAddTimeMajor(b, True)
    return S.UnidirectionalSequenceLSTMOptionsEnd(b)
