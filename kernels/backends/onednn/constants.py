"""The values of oneDNN's C API that the binding passes (include/oneapi/dnnl/dnnl_types.h and
dnnl_common_types.h, oneDNN 3.x), written out because nothing compiles at install time: a machine
with the wheels has the library, not necessarily its headers or a compiler.

Each name is the C enumerator's or macro's without its `dnnl_` / `DNNL_` prefix; tests compile the
header and compare every value here with the compiler's (tests/test_onednn_backend.py), so a oneDNN
that renumbered one would fail there, not compute something else."""

from __future__ import annotations

from typing import Final

# dnnl_status_t
SUCCESS: Final = 0
UNIMPLEMENTED: Final = 3
LAST_IMPL_REACHED: Final = 4

# dnnl_data_type_t
F16: Final = 1
BF16: Final = 2
F32: Final = 3
S32: Final = 4
S8: Final = 5
U8: Final = 6

# dnnl_engine_kind_t, dnnl_stream_flags_t
ENGINE_CPU: Final = 1
STREAM_DEFAULT_FLAGS: Final = 1

# dnnl_format_tag_t: `any` lets the primitive choose its own (blocked) layout
TAG_ANY: Final = 1
TAG_A: Final = 2  # a vector (a bias)
TAG_AB: Final = 3  # a row-major matrix
TAG_ABC: Final = 4  # 3-D row-major: tnc (RNN layers), a batch of matrices
TAG_ABCD: Final = 5  # 4-D row-major: nchw, oihw, ldnc (RNN states), ldgo (RNN biases)
TAG_ABCDE: Final = 6  # 5-D row-major: ldigo (RNN weights)
TAG_ACB: Final = 15  # a batch of column-major matrices (the transposed operand of a batched GEMM)

# dnnl_prop_kind_t
FORWARD_TRAINING: Final = 64
FORWARD_INFERENCE: Final = 96
BACKWARD: Final = 128
BACKWARD_DATA: Final = 160
BACKWARD_WEIGHTS: Final = 192

# dnnl_alg_kind_t
CONVOLUTION_DIRECT: Final = 1
CONVOLUTION_WINOGRAD: Final = 2
CONVOLUTION_AUTO: Final = 3
ELTWISE_RELU: Final = 32
VANILLA_RNN: Final = 8191
VANILLA_LSTM: Final = 12287
VANILLA_GRU: Final = 16383
LBR_GRU: Final = 20479

# dnnl_rnn_flags_t, dnnl_rnn_direction_t
RNN_FLAGS_UNDEF: Final = 0
UNIDIRECTIONAL_LEFT2RIGHT: Final = 1

# dnnl_query_t: of a primitive descriptor ...
QUERY_IMPL_INFO_STR: Final = 8
QUERY_SRC_MD: Final = 129
QUERY_DIFF_SRC_MD: Final = 130
QUERY_WEIGHTS_MD: Final = 131
QUERY_DIFF_WEIGHTS_MD: Final = 132
QUERY_DST_MD: Final = 133
QUERY_DIFF_DST_MD: Final = 134
QUERY_WORKSPACE_MD: Final = 135
QUERY_SCRATCHPAD_MD: Final = 136
QUERY_EXEC_ARG_MD: Final = 255
# ... and of a memory descriptor
QUERY_NDIMS_S32: Final = 256
QUERY_DIMS: Final = 257
QUERY_DATA_TYPE: Final = 258
QUERY_FORMAT_KIND: Final = 262
QUERY_STRIDES: Final = 14
QUERY_INNER_NBLKS_S32: Final = 263
QUERY_INNER_BLKS: Final = 264
QUERY_INNER_IDXS: Final = 265

# dnnl_format_kind_t
FORMAT_KIND_ANY: Final = 1
FORMAT_KIND_BLOCKED: Final = 2
FORMAT_KIND_OPAQUE: Final = 3

# dnnl_scratchpad_mode_t, dnnl_fpmath_mode_t
SCRATCHPAD_MODE_USER: Final = 1
FPMATH_MODE_STRICT: Final = 0

# dnnl_cpu_isa_t: each ISA's bits hold those of every ISA it contains
ISA_AVX2: Final = 7
ISA_AVX2_VNNI: Final = 15
ISA_AVX2_VNNI_2: Final = 31
ISA_AVX512_CORE: Final = 39
ISA_AVX512_CORE_VNNI: Final = 103
ISA_AVX512_CORE_BF16: Final = 231
ISA_AVX512_CORE_FP16: Final = 495
ISA_AVX512_CORE_AMX: Final = 4079

# dnnl_runtime (dnnl_config.h: DNNL_RUNTIME_*), as dnnl_version()'s cpu_runtime reports it
RUNTIME_SEQ: Final = 1
RUNTIME_OMP: Final = 2
RUNTIME_TBB: Final = 4
RUNTIME_THREADPOOL: Final = 8
RUNTIME_SYCL: Final = 512

# DNNL_ARG_*: the execution arguments
ARG_SRC: Final = 1  # also an RNN's SRC_LAYER
ARG_SRC_ITER: Final = 2
ARG_SRC_ITER_C: Final = 3
ARG_DST: Final = 17  # also an RNN's DST_LAYER
ARG_DST_ITER: Final = 18
ARG_DST_ITER_C: Final = 19
ARG_WEIGHTS: Final = 33  # also an RNN's WEIGHTS_LAYER
ARG_WEIGHTS_ITER: Final = 34
ARG_BIAS: Final = 41
ARG_WORKSPACE: Final = 64
ARG_SCRATCHPAD: Final = 80
ARG_DIFF_SRC: Final = 129
ARG_DIFF_SRC_ITER: Final = 130
ARG_DIFF_SRC_ITER_C: Final = 131
ARG_DIFF_DST: Final = 145
ARG_DIFF_DST_ITER: Final = 146
ARG_DIFF_DST_ITER_C: Final = 147
ARG_DIFF_WEIGHTS: Final = 161
ARG_DIFF_WEIGHTS_ITER: Final = 162
ARG_DIFF_BIAS: Final = 169
ARG_ATTR_SCALES: Final = 4096  # | an argument: that argument's scales

MAX_NDIMS: Final = 12  # DNNL_MAX_NDIMS: the length of a dnnl_dims_t
MEMORY_ALLOCATE: Final = -1  # DNNL_MEMORY_ALLOCATE, ((void *)(size_t)-1): the library allocates the buffer
