// A native loop over cuDNN's legacy algorithm search, as DeepBench's conv_bench.cu chose its algorithms:
// cudnnFindConvolution{Forward,BackwardData,BackwardFilter}AlgorithmEx over EVERY algorithm the
// library has (requestedAlgoCount = cudnnGetConvolution*AlgorithmMaxCount), each one checked, the
// fastest correct one timed. conv_loop.cpp races the same heuristics' list as the harness, so it
// cannot show what that list misses; this loop does not ask the graph API's heuristics at all.
//
// Input on stdin, one problem a line:
//   PRECISION DIRECTION N C H W K R S PAD_H PAD_W STRIDE_H STRIDE_W LAYOUT TOLERANCE TRANSFORM_TOLERANCE SECONDS
//   PRECISION fp32|tf32|fp16|bf16|int8; DIRECTION fwd|bwd_data|bwd_filter (int8: fwd only);
//   sizes as handed to cuDNN (the caller passes the padded sizes a result records);
//   LAYOUT deepbench|nchw|nhwc|nchw_vect_c. `deepbench` is conv_bench.cu's (tensor-core build): NCHW for
//     fp32/tf32, NHWC for fp16/bf16, int8 NCHW_VECT_C with INT8x32 on compute capability 7.5 and later,
//     else NHWC; filters in the same format (KCRS, KRSC, K C/32 R S 32);
//   TOLERANCE: the relative Frobenius error over the sampled output elements a correct algorithm stays
//     within (the caller derives it: kernels/precision.py tolerance(precision, reduction));
//   TRANSFORM_TOLERANCE: the same for the transform-domain algorithms (FFT, FFT_TILING, WINOGRAD,
//     WINOGRAD_NONFUSED), which lose about a digit in fp32 (kernels/precision.py TRANSFORM_TOLERANCE);
//   SECONDS: how long each timed algorithm runs each way (host loop, CUDA graph).
// Output, every line starting with the input fields as given:
//   ... find RANK ALGO STATUS FIND_US MEMORY MATH DETERMINISM CHECK ERROR
//       one per entry cudnnFind returned, in its order (fastest first): the algorithm's enum name
//       (CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED ...), its status (CUDNN_STATUS_...), the time
//       cudnnFind measured (us), its workspace bytes, math type and determinism (cuDNN's enum names);
//       CHECK passed|failed|- (not run: its status is not SUCCESS) and ERROR (relative error; int8:
//       the largest difference in output units; `-` where not run);
//   ... timed ALGO MATH US_PER_CALL US_PER_CALL_GRAPH CALLS MHZ GRAPH_MHZ
//       each contender timed (loop_timing.h): the fastest correct entry and every correct entry
//       cudnnFind timed within CONTENDER_MARGIN of it (at most MAX_CONTENDERS): cudnnFind's own
//       timing is a few calls, so near-ties are settled by timing them alike;
//   ... fastest ALGO MATH US_PER_CALL US_PER_CALL_GRAPH LAYOUT WORKSPACE_GIVEN RETURNED SUCCEEDED CORRECT
//       one per direction: the fastest correct algorithm (by the better of its two times), the layout
//       it ran in (nchw|nhwc|nchw_vect_c), the workspace bytes handed to cudnnFind, how many entries
//       cudnnFind returned, how many ran (SUCCESS) and how many of those computed correctly;
//   ... fallback nchw_vect_c REASON
//       int8 under LAYOUT deepbench: NCHW_VECT_C could not run (REASON); the lines before it for this problem are
//       void, and the problem runs again in NHWC (conv_bench.cu's layout where NCHW_VECT_C is not offered);
//   ... error REASON
//       the problem could not run (bad input, no correct algorithm ...); the next line runs.
// Figures NaN print as `nan`. On stderr first: `# cudnn VERSION` (cudnnGetVersion), `# device NAME cc MAJOR.MINOR`,
// `# NVIDIA_TF32_OVERRIDE VALUE` (or `unset`).
//
// Types: fp32 FLOAT data and compute with CUDNN_FMA_MATH (no TF32: true fp32, as DeepBench's float under
// NVIDIA_TF32_OVERRIDE=0; every entry's MATH says which math ran); tf32 FLOAT with CUDNN_TENSOR_OP_MATH (refused
// under NVIDIA_TF32_OVERRIDE=0); fp16/bf16 HALF/BFLOAT16 data, FLOAT compute (fp32 accumulate, the harness's
// rule and DeepBench's training build; its inference build accumulated half) with CUDNN_TENSOR_OP_MATH;
// int8 INT8x32 (NCHW_VECT_C) or INT8 (NHWC) data, INT32 compute, int8 output as conv_bench.cu's int8 config
// (alpha = 2^-SHIFT scales the int32 accumulator into int8's range, so the check sees values, not saturation).
// Cross-correlation, dilation 1 (the harness's arithmetic; DeepBench's CUDNN_CONVOLUTION reads the filter reversed).
// Inputs are random as the harness draws them (standard normal, filters scaled by 1/sqrt(C*R*S); int8
// integers in [-64, 64)), never zeros. The workspace is the largest any algorithm asks
// (cudnnGetConvolution*WorkspaceSize, or the estimate of cudnnGetConvolution*Algorithm_v7 where larger), bounded by
// free memory less WORKSPACE_RESERVE.
// Check: SAMPLES output elements (pseudo-random positions) recomputed in float64 from the definition
// on the host; an algorithm's output buffer is filled with 0xFF bytes (NaN / -1) before its run.
//
// Build: build_native.sh (needs cudnn.h, libcudnn and cuBLASLt, loaded as the harness's process has it; no
// cudnn-frontend).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "conv_reference.h"
#include "loop_lines.h"
#include "loop_timing.h"

static const int FIELDS = 17;
static const int SAMPLES = 128;                             // output elements checked per algorithm
static const size_t WORKSPACE_RESERVE = size_t(512) << 20;  // free memory left beside the workspace
static const float CONTENDER_MARGIN = 1.10f;                // cudnnFind times within 10% are timed again
static const int MAX_CONTENDERS = 3;
static const double INT8_LSB = 1.0;      // int8 output: rounding of the scaled accumulator may differ by one
static const double INT8_TARGET = 32.0;  // int8 output: the scaled accumulator's typical magnitude
static const int VECT_C_MIN_CC = 75;     // conv_bench.cu: NCHW_VECT_C from compute capability 7.5

using conv_reference::Layout;
using conv_reference::Shape;
using conv_reference::VECT;

struct Problem : conv_reference::Conv {
  std::string precision, layout;
  double tolerance, transform_tolerance, seconds;
  std::string fields;  // the input fields as given, echoed at the start of every output line (loop_lines.h)
};

static bool parse(const std::string& line, Problem& p) {
  std::istringstream in(line);
  p.fields = loop_lines::echoed(line, FIELDS);
  return bool(in >> p.precision >> p.direction >> p.n >> p.c >> p.h >> p.w >> p.k >> p.r >> p.s >> p.pad_h >>
              p.pad_w >> p.stride_h >> p.stride_w >> p.layout >> p.tolerance >> p.transform_tolerance >> p.seconds);
}

struct Types {
  cudnnDataType_t io, compute;
  cudnnMathType_t math;
  size_t bytes;  // per element, inputs and output alike (int8: the output is int8 too, as conv_bench.cu's)
  bool integer;
};

static std::string types_of(const std::string& precision, Layout layout, Types& t) {
  if (precision == "fp32") t = {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, 4, false};
  else if (precision == "tf32") t = {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, 4, false};
  else if (precision == "fp16") t = {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, 2, false};
  else if (precision == "bf16") t = {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, 2, false};
  else if (precision == "int8")
    t = {layout == Layout::VECT_C ? CUDNN_DATA_INT8x32 : CUDNN_DATA_INT8, CUDNN_DATA_INT32, CUDNN_TENSOR_OP_MATH, 1, true};
  else return "unknown precision (fp32|tf32|fp16|bf16|int8)";
  if (layout == Layout::VECT_C && precision != "int8") return "nchw_vect_c is int8's layout (INT8x32)";
  return "";
}

static std::string layout_of(const Problem& p, int cc, Layout& l) {
  if (p.layout == "deepbench") {
    if (p.precision == "fp16" || p.precision == "bf16") l = Layout::NHWC;
    else if (p.precision == "int8") l = cc >= VECT_C_MIN_CC ? Layout::VECT_C : Layout::NHWC;
    else l = Layout::NCHW;
  } else if (p.layout == "nchw") l = Layout::NCHW;
  else if (p.layout == "nhwc") l = Layout::NHWC;
  else if (p.layout == "nchw_vect_c") l = Layout::VECT_C;
  else return "unknown layout (deepbench|nchw|nhwc|nchw_vect_c)";
  return "";
}

using loop_lines::DeviceMemory;

// The descriptors of one problem, destroyed however it ends.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Descriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

#define TRY_CUDNN(what, expr) do { const cudnnStatus_t s_ = (expr); \
  if (s_ != CUDNN_STATUS_SUCCESS) return std::string(what) + ": " + cudnnGetErrorString(s_); } while (0)
#define TRY_CUDA(what, expr) do { const cudaError_t e_ = (expr); \
  if (e_ != cudaSuccess) { (void)cudaGetLastError(); return std::string(what) + ": " + cudaGetErrorString(e_); } } while (0)

static cudnnTensorFormat_t format_of(Layout l) {
  return l == Layout::NCHW ? CUDNN_TENSOR_NCHW : l == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW_VECT_C;
}

// An input's values, random as the harness draws them, by storage index: `host` keeps them (as the
// device holds them, rounded to the io type) for the reference.
static std::string upload(DeviceMemory& mem, void** p, const Types& t, size_t n, float scale, unsigned seed,
                          std::vector<float>& host) {
  host.resize(n);
  std::vector<char> bytes(n * t.bytes);
  for (size_t i = 0; i < n; ++i) {
    if (t.integer) {
      const int8_t v = int8_t(std::floor(loop_timing::uniform_at(i, seed) * loop_timing::INT8_RANGE));
      reinterpret_cast<int8_t*>(bytes.data())[i] = v;
      host[i] = v;
      continue;
    }
    const float v = loop_timing::normal_at(i, seed) * scale;
    if (t.io == CUDNN_DATA_HALF) {
      const __half h = __float2half(v);
      reinterpret_cast<__half*>(bytes.data())[i] = h;
      host[i] = __half2float(h);
    } else if (t.io == CUDNN_DATA_BFLOAT16) {
      const __nv_bfloat16 b = __float2bfloat16(v);
      reinterpret_cast<__nv_bfloat16*>(bytes.data())[i] = b;
      host[i] = __bfloat162float(b);
    } else {
      reinterpret_cast<float*>(bytes.data())[i] = v;
      host[i] = v;
    }
  }
  std::string error = mem.alloc(p, bytes.size());
  if (!error.empty()) return error;
  TRY_CUDA("cudaMemcpy", cudaMemcpy(*p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return "";
}

// One output element, read back as a double.
static std::string read_element(const void* base, const Types& t, size_t index, double& out) {
  unsigned char raw[4] = {0, 0, 0, 0};
  TRY_CUDA("cudaMemcpy", cudaMemcpy(raw, static_cast<const char*>(base) + index * t.bytes, t.bytes, cudaMemcpyDeviceToHost));
  if (t.integer) out = double(*reinterpret_cast<int8_t*>(raw));
  else if (t.io == CUDNN_DATA_HALF) out = double(__half2float(*reinterpret_cast<__half*>(raw)));
  else if (t.io == CUDNN_DATA_BFLOAT16) out = double(__bfloat162float(*reinterpret_cast<__nv_bfloat16*>(raw)));
  else out = double(*reinterpret_cast<float*>(raw));
  return "";
}

// One entry of cudnnFind's answer, whichever direction it came from.
struct Entry {
  int algo;
  cudnnStatus_t status;
  float ms;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
  bool checked = false, passed = false;
  double error = NAN;
};

static const char* algo_name(const std::string& direction, int algo) {
  if (direction == "fwd") {
    switch (cudnnConvolutionFwdAlgo_t(algo)) {
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "CUDNN_CONVOLUTION_FWD_ALGO_GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT";
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "CUDNN_CONVOLUTION_FWD_ALGO_FFT";
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING";
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD";
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED";
      default: return "CUDNN_CONVOLUTION_FWD_ALGO_UNKNOWN";
    }
  }
  if (direction == "bwd_data") {
    switch (cudnnConvolutionBwdDataAlgo_t(algo)) {
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED";
      default: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_UNKNOWN";
    }
  }
  switch (cudnnConvolutionBwdFilterAlgo_t(algo)) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD: return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING";
    default: return "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_UNKNOWN";
  }
}

// Whether an algorithm computes in a transform domain (its rounding is amplified: TRANSFORM_TOLERANCE).
static bool transform_domain(const std::string& name) {
  return name.find("FFT") != std::string::npos || name.find("WINOGRAD") != std::string::npos;
}

static const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "CUDNN_DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "CUDNN_TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "CUDNN_FMA_MATH";
    default: return "CUDNN_MATH_UNKNOWN";
  }
}

static const char* determinism_name(cudnnDeterminism_t d) {
  return d == CUDNN_DETERMINISTIC ? "CUDNN_DETERMINISTIC" : "CUDNN_NON_DETERMINISTIC";
}

static std::string number(double v, const char* format = "%.4f") {
  if (std::isnan(v)) return "nan";
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// A pseudo-random index in [0, n): the sampled output positions.
static int64_t index_at(size_t i, unsigned seed, int64_t n) {
  const int64_t v = int64_t((loop_timing::uniform_at(i, seed) + 1.0f) * 0.5f * float(n));
  return std::min(std::max<int64_t>(v, 0), n - 1);
}

// The problem's tensors, their host copies and the float64 reference of the sampled output elements.
struct Sampled {
  std::vector<size_t> where;  // storage index of each sampled output element
  std::vector<double> ref;    // its float64 value (int8: rounded and saturated as the int8 output is)
};

// The check of the output buffer against the sampled reference: relative Frobenius error (int8: the
// largest difference in output units); NaN where any sampled element is not finite.
static std::string output_error(const void* out, const Types& t, const Sampled& sampled, double& error) {
  double diff2 = 0.0, ref2 = 0.0, worst = 0.0;
  for (size_t i = 0; i < sampled.where.size(); ++i) {
    double got = 0.0;
    const std::string e = read_element(out, t, sampled.where[i], got);
    if (!e.empty()) return e;
    if (!std::isfinite(got)) {
      error = NAN;
      return "";
    }
    const double d = got - sampled.ref[i];
    diff2 += d * d;
    ref2 += sampled.ref[i] * sampled.ref[i];
    worst = std::max(worst, std::fabs(d));
  }
  error = t.integer ? worst : (ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2));
  return "";
}

// Find, check and time one direction, printing its lines; "" or why it cannot run.
static std::string run_problem(cudnnHandle_t handle, loop_timing::Timer& timer, const Problem& p, Layout layout,
                               unsigned& seed) {
  Types t;
  std::string error = types_of(p.precision, layout, t);
  if (!error.empty()) return error;
  if (p.direction != "fwd" && p.direction != "bwd_data" && p.direction != "bwd_filter")
    return "unknown direction (fwd|bwd_data|bwd_filter)";
  if (t.integer && p.direction != "fwd") return "cuDNN has no int8 backward convolution";
  for (int64_t v : {p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.stride_h, p.stride_w})
    if (v <= 0) return "sizes and strides must be positive";
  if (p.pad_h < 0 || p.pad_w < 0) return "padding must not be negative";
  if (!(p.tolerance >= 0) || !(p.transform_tolerance >= 0) || !(p.seconds > 0))
    return "TOLERANCE and TRANSFORM_TOLERANCE must be >= 0, SECONDS > 0";
  if (layout == Layout::VECT_C && (p.c % VECT || p.k % VECT)) return "nchw_vect_c needs C and K multiples of 32";
  const char* override_tf32 = std::getenv("NVIDIA_TF32_OVERRIDE");
  if (p.precision == "tf32" && override_tf32 && std::strcmp(override_tf32, "0") == 0)
    return "tf32 asked under NVIDIA_TF32_OVERRIDE=0, which turns TF32 off";
  const int64_t P = (p.h + 2 * p.pad_h - p.r) / p.stride_h + 1, Q = (p.w + 2 * p.pad_w - p.s) / p.stride_w + 1;
  if (P <= 0 || Q <= 0) return "the filter is larger than the padded input";
  const Shape xs{{p.n, p.c, p.h, p.w}, layout}, ws{{p.k, p.c, p.r, p.s}, layout}, ys{{p.n, p.k, P, Q}, layout};

  Descriptors d;
  TRY_CUDNN("cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&d.x));
  TRY_CUDNN("cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&d.y));
  TRY_CUDNN("cudnnCreateFilterDescriptor", cudnnCreateFilterDescriptor(&d.w));
  TRY_CUDNN("cudnnCreateConvolutionDescriptor", cudnnCreateConvolutionDescriptor(&d.conv));
  const cudnnTensorFormat_t format = format_of(layout);
  TRY_CUDNN("cudnnSetTensor4dDescriptor x", cudnnSetTensor4dDescriptor(d.x, format, t.io, int(p.n), int(p.c), int(p.h), int(p.w)));
  TRY_CUDNN("cudnnSetTensor4dDescriptor y", cudnnSetTensor4dDescriptor(d.y, format, t.io, int(p.n), int(p.k), int(P), int(Q)));
  TRY_CUDNN("cudnnSetFilter4dDescriptor", cudnnSetFilter4dDescriptor(d.w, t.io, format, int(p.k), int(p.c), int(p.r), int(p.s)));
  TRY_CUDNN("cudnnSetConvolution2dDescriptor",
            cudnnSetConvolution2dDescriptor(d.conv, int(p.pad_h), int(p.pad_w), int(p.stride_h), int(p.stride_w), 1, 1,
                                            CUDNN_CROSS_CORRELATION, t.compute));
  TRY_CUDNN("cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(d.conv, t.math));
  int on, oc, oh, ow;
  TRY_CUDNN("cudnnGetConvolution2dForwardOutputDim", cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &on, &oc, &oh, &ow));
  if (on != p.n || oc != p.k || oh != P || ow != Q) return "cuDNN's output size differs from the definition's";

  // The direction's two inputs (a, b), their shapes and scales, and its output.
  const bool fwd = p.direction == "fwd", data = p.direction == "bwd_data";
  const Shape& a_shape = data ? ys : xs;
  const Shape& b_shape = fwd || data ? ws : ys;
  const Shape& out_shape = fwd ? ys : data ? xs : ws;
  const float w_scale = 1.0f / std::sqrt(float(p.c * p.r * p.s));
  DeviceMemory mem;
  void *a_ptr, *b_ptr, *out_ptr, *workspace = nullptr;
  std::vector<float> a_host, b_host;
  error = upload(mem, &a_ptr, t, a_shape.elements(), 1.0f, seed++, a_host);
  if (error.empty()) error = upload(mem, &b_ptr, t, b_shape.elements(), fwd || data ? w_scale : 1.0f, seed++, b_host);
  if (error.empty()) error = mem.alloc(&out_ptr, out_shape.elements() * t.bytes);
  if (!error.empty()) return error;
  // The copies went on the legacy stream, which the timer's non-blocking stream does not wait for.
  TRY_CUDA("cudaDeviceSynchronize", cudaDeviceSynchronize());

  // int8: alpha = 2^-shift brings the int32 accumulator (about 37^2 sqrt(C R S)) to about INT8_TARGET.
  const double reduction = double(p.c * p.r * p.s);
  const int shift = t.integer ? std::max(0, int(std::lround(std::log2(37.0 * 37.0 * std::sqrt(reduction) / INT8_TARGET)))) : 0;
  const float alpha = std::ldexp(1.0f, -shift), beta = 0.0f;

  // The largest workspace any algorithm asks for this problem: cudnnGetConvolution*WorkspaceSize per algorithm and
  // the heuristics' estimates (cudnnGetConvolution*Algorithm_v7), whichever is larger (DeepBench found the former
  // wrong for int8 and gave int8 1 GiB).
  int max_count = 0, estimated = 0;
  size_t need = 0;
  auto consider = [&](cudnnStatus_t status, size_t bytes) {
    if (status == CUDNN_STATUS_SUCCESS) need = std::max(need, bytes);
  };
  auto estimates = [&](const auto& perf) {
    for (int i = 0; i < estimated; ++i) consider(perf[i].status, perf[i].memory);
  };
  if (fwd) {
    TRY_CUDNN("cudnnGetConvolutionForwardAlgorithmMaxCount", cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
    for (int a = 0; a < max_count; ++a) {
      size_t bytes = 0;
      consider(cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, cudnnConvolutionFwdAlgo_t(a), &bytes),
               bytes);
    }
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max_count);
    if (cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y, max_count, &estimated, perf.data()) ==
        CUDNN_STATUS_SUCCESS)
      estimates(perf);
  } else if (data) {
    TRY_CUDNN("cudnnGetConvolutionBackwardDataAlgorithmMaxCount",
              cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
    for (int a = 0; a < max_count; ++a) {
      size_t bytes = 0;
      consider(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d.w, d.y, d.conv, d.x,
                                                            cudnnConvolutionBwdDataAlgo_t(a), &bytes),
               bytes);
    }
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(max_count);
    if (cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, d.w, d.y, d.conv, d.x, max_count, &estimated,
                                                    perf.data()) == CUDNN_STATUS_SUCCESS)
      estimates(perf);
  } else {
    TRY_CUDNN("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount",
              cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
    for (int a = 0; a < max_count; ++a) {
      size_t bytes = 0;
      consider(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, d.x, d.y, d.conv, d.w,
                                                              cudnnConvolutionBwdFilterAlgo_t(a), &bytes),
               bytes);
    }
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(max_count);
    if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, d.x, d.y, d.conv, d.w, max_count, &estimated,
                                                      perf.data()) == CUDNN_STATUS_SUCCESS)
      estimates(perf);
  }
  size_t free_bytes = 0, total_bytes = 0;
  TRY_CUDA("cudaMemGetInfo", cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t given = std::min(need, free_bytes > WORKSPACE_RESERVE ? free_bytes - WORKSPACE_RESERVE : 0);
  if (given > 0) {
    error = mem.alloc(&workspace, given);
    if (!error.empty()) return error;
  }

  // One call of an algorithm (with its math type set on the descriptor beforehand).
  auto launch = [&](int algo) -> cudnnStatus_t {
    if (fwd)
      return cudnnConvolutionForward(handle, &alpha, d.x, a_ptr, d.w, b_ptr, d.conv, cudnnConvolutionFwdAlgo_t(algo),
                                     workspace, given, &beta, d.y, out_ptr);
    if (data)
      return cudnnConvolutionBackwardData(handle, &alpha, d.w, b_ptr, d.y, a_ptr, d.conv,
                                          cudnnConvolutionBwdDataAlgo_t(algo), workspace, given, &beta, d.x, out_ptr);
    return cudnnConvolutionBackwardFilter(handle, &alpha, d.x, a_ptr, d.y, b_ptr, d.conv,
                                          cudnnConvolutionBwdFilterAlgo_t(algo), workspace, given, &beta, d.w, out_ptr);
  };

  // cudnnFind over every algorithm, with the caller's buffers and the workspace above.
  std::vector<Entry> entries;
  int returned = 0;
  auto keep = [&](const auto& perf) {
    for (int i = 0; i < returned; ++i)
      entries.push_back({int(perf[i].algo), perf[i].status, perf[i].time, perf[i].memory, perf[i].determinism,
                         perf[i].mathType});
  };
  if (fwd) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max_count);
    TRY_CUDNN("cudnnFindConvolutionForwardAlgorithmEx",
              cudnnFindConvolutionForwardAlgorithmEx(handle, d.x, a_ptr, d.w, b_ptr, d.conv, d.y, out_ptr, max_count,
                                                     &returned, perf.data(), workspace, given));
    keep(perf);
  } else if (data) {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(max_count);
    TRY_CUDNN("cudnnFindConvolutionBackwardDataAlgorithmEx",
              cudnnFindConvolutionBackwardDataAlgorithmEx(handle, d.w, b_ptr, d.y, a_ptr, d.conv, d.x, out_ptr,
                                                          max_count, &returned, perf.data(), workspace, given));
    keep(perf);
  } else {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(max_count);
    TRY_CUDNN("cudnnFindConvolutionBackwardFilterAlgorithmEx",
              cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, d.x, a_ptr, d.y, b_ptr, d.conv, d.w, out_ptr,
                                                            max_count, &returned, perf.data(), workspace, given));
    keep(perf);
  }
  TRY_CUDA("after cudnnFind", cudaStreamSynchronize(timer.stream));

  // The sampled reference, computed once for every algorithm's check.
  Sampled sampled;
  for (int i = 0; i < SAMPLES; ++i) {
    const int64_t o[4] = {index_at(i, seed, out_shape.d[0]), index_at(i, seed + 1, out_shape.d[1]),
                          index_at(i, seed + 2, out_shape.d[2]), index_at(i, seed + 3, out_shape.d[3])};
    double v = conv_reference::value(p, xs, ws, ys, a_host, b_host, o);
    if (t.integer) v = std::min(127.0, std::max(-128.0, std::nearbyint(std::ldexp(v, -shift))));
    sampled.where.push_back(out_shape.at(o[0], o[1], o[2], o[3]));
    sampled.ref.push_back(v);
  }
  seed += 4;

  // Each entry that ran, run again on its own and checked.
  int succeeded = 0, correct = 0;
  for (Entry& e : entries) {
    if (e.status != CUDNN_STATUS_SUCCESS) continue;
    ++succeeded;
    TRY_CUDNN("cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(d.conv, e.math));
    TRY_CUDA("cudaMemset", cudaMemsetAsync(out_ptr, 0xFF, out_shape.elements() * t.bytes, timer.stream));
    const cudnnStatus_t s = launch(e.algo);
    TRY_CUDA("check run", cudaStreamSynchronize(timer.stream));
    if (s != CUDNN_STATUS_SUCCESS) {
      e.status = s;  // ran in cudnnFind, refused now: not a candidate
      --succeeded;
      continue;
    }
    error = output_error(out_ptr, t, sampled, e.error);
    if (!error.empty()) return error;
    const double tol = t.integer ? INT8_LSB
                                 : transform_domain(algo_name(p.direction, e.algo)) ? std::max(p.tolerance, p.transform_tolerance)
                                                                                   : p.tolerance;
    e.checked = true;
    e.passed = !std::isnan(e.error) && e.error <= tol;
    correct += e.passed;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    std::printf("%s find %zu %s %s %s %zu %s %s %s %s\n", p.fields.c_str(), i, algo_name(p.direction, e.algo),
                cudnnGetErrorString(e.status), number(double(e.ms) * 1000.0).c_str(), e.memory, math_name(e.math),
                determinism_name(e.determinism), e.checked ? (e.passed ? "passed" : "failed") : "-",
                e.checked ? number(e.error, "%.3e").c_str() : "-");
  }
  std::fflush(stdout);

  // The contenders: correct entries that cudnnFind timed within CONTENDER_MARGIN of the fastest correct one.
  std::vector<const Entry*> contenders;
  for (const Entry& e : entries)
    if (e.passed && (contenders.empty() || e.ms <= CONTENDER_MARGIN * contenders[0]->ms) &&
        int(contenders.size()) < MAX_CONTENDERS)
      contenders.push_back(&e);
  if (contenders.empty())
    return "no algorithm cudnnFind returned computed this direction correctly (" + std::to_string(succeeded) + " of " +
           std::to_string(entries.size()) + " ran)";
  const Entry* best = nullptr;
  loop_timing::Times best_times;
  float best_us = INFINITY;
  std::string untimed;  // why contenders could not be timed (the others still count)
  for (const Entry* e : contenders) {
    TRY_CUDNN("cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(d.conv, e->math));
    cudnnStatus_t failed = CUDNN_STATUS_SUCCESS;
    auto call = [&]() {
      const cudnnStatus_t s = launch(e->algo);
      if (s != CUDNN_STATUS_SUCCESS) failed = s;
      return s == CUDNN_STATUS_SUCCESS;
    };
    loop_timing::Times times;
    if (!timer.time_calls(call, 1000.0 * p.seconds, times)) {
      untimed += std::string(untimed.empty() ? "" : "; ") + "timing " + algo_name(p.direction, e->algo) + ": " +
                 cudnnGetErrorString(failed);
      continue;
    }
    std::printf("%s timed %s %s %s %s %d %s %s\n", p.fields.c_str(), algo_name(p.direction, e->algo),
                math_name(e->math), number(times.stream_us).c_str(), number(times.graph_us).c_str(), times.calls,
                number(times.stream_mhz, "%.0f").c_str(), number(times.graph_mhz, "%.0f").c_str());
    const float us = std::isnan(times.graph_us) ? times.stream_us : std::min(times.stream_us, times.graph_us);
    if (us < best_us) best_us = us, best = e, best_times = times;
  }
  if (!best) return untimed;
  std::printf("%s fastest %s %s %s %s %s %zu %zu %d %d\n", p.fields.c_str(), algo_name(p.direction, best->algo),
              math_name(best->math), number(best_times.stream_us).c_str(), number(best_times.graph_us).c_str(),
              conv_reference::layout_name(layout), given, entries.size(), succeeded, correct);
  return "";
}

// A cuDNN handle on `stream`; nullptr (with why on stderr) where cuDNN cannot start.
static cudnnHandle_t handle_on(cudaStream_t stream) {
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t status = cudnnCreate(&handle);
  if (status == CUDNN_STATUS_SUCCESS && (status = cudnnSetStream(handle, stream)) == CUDNN_STATUS_SUCCESS) return handle;
  std::fprintf(stderr, "cudnn: %s\n", cudnnGetErrorString(status));
  if (handle) cudnnDestroy(handle);
  return nullptr;
}

int main() {
  loop_timing::Timer timer;
  const cudnnHandle_t handle = handle_on(timer.stream);
  if (!handle) return 1;
  int device = 0;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  const int cc = prop.major * 10 + prop.minor;
  const char* tf32 = std::getenv("NVIDIA_TF32_OVERRIDE");
  std::fprintf(stderr, "# cudnn %zu\n# device %s cc %d.%d\n# NVIDIA_TF32_OVERRIDE %s\n", cudnnGetVersion(), prop.name,
               prop.major, prop.minor, tf32 ? tf32 : "unset");
  unsigned seed = 1;
  loop_lines::each_line(FIELDS, [&](const std::string& line) {
    Problem p;
    if (!parse(line, p)) return "malformed line (" + std::to_string(FIELDS) + " fields: see conv_find.cpp)";
    Layout layout = Layout::NCHW;
    std::string error = layout_of(p, cc, layout);
    if (!error.empty()) return error;
    error = run_problem(handle, timer, p, layout, seed);
    if (!error.empty() && p.layout == "deepbench" && layout == Layout::VECT_C) {  // conv_bench.cu's "else NHWC"
      std::printf("%s fallback %s %s\n", p.fields.c_str(), conv_reference::layout_name(layout), error.c_str());
      error = run_problem(handle, timer, p, Layout::NHWC, seed);
    }
    return error;
  });
  cudnnDestroy(handle);
  return 0;
}
