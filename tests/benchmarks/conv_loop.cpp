// A plain native loop over cuDNN convolutions through cudnn-frontend's C++ graph API: the reference
// the native side-by-side compares the harness's cuDNN backend (kernels/backends/cudnn) with.
//
// Input on stdin, one problem a line:
//   PRECISION DIRECTION N C H W K R S PAD_H PAD_W STRIDE_H STRIDE_W ENGINE SECONDS [LAYOUT]
//   PRECISION fp32|tf32|fp16|bf16|int8; DIRECTION fwd|bwd_data|bwd_filter (int8: fwd only);
//   LAYOUT nchw|nhwc, the layout the harness's result records (info.layout); without it DeepBench's:
//          NHWC for fp16, bf16 and int8, NCHW for fp32 and tf32 (not echoed in the output);
//   ENGINE `-`: every candidate cuDNN's heuristics offer, under the harness's former candidate policy
//          (before kernels/backends/cudnn/search.py widened it): modes A then FALLBACK, without plans that
//          need runtime compilation or more than 1 GiB of workspace, for fp32 without plans
//          whose numerical notes say TENSOR_CORE or DOWN_CONVERT_INPUTS (TF32), at most
//          MAX_CANDIDATES plans that build, duplicates (the same plan name) dropped;
//   ENGINE `ID` or `ID:KNOB=V,KNOB=V`: exactly that engine (create_execution_plan), knobs by the
//          numeric value of cudnn_frontend::KnobType_t (the caller converts cudnn.knob_type names);
//   ENGINE `engNN_kA=V_kB=V`: the plan cuDNN names so (a result's info.cudnn.plan_name), found among
//          the heuristics' plans (modes A and FALLBACK, nothing deselected): every knob cuDNN set,
//          some of which the frontend's knob list leaves out (engine 49's split-K).
// Output, one line per timed engine (input fields first, in the order read):
//   ... ENGINE_ID KNOBS PLAN_NAME US_PER_CALL US_PER_CALL_GRAPH      (KNOBS `-` or `k=v,...` numeric)
//   ... ENGINE_ID KNOBS PLAN_NAME error REASON                      (a candidate that did not run)
//   ... error REASON                                                (the problem cannot run; the next one does)
// On stderr first: `# cudnn VERSION` (cudnnGetVersion), the library this binary loaded.
//
// The problem is the harness's (kernels/backends/cudnn/graphs.py): NCHW tensors and KCRS filters,
// or NHWC and KRSC (LAYOUT; int8 always, as cuDNN's int8 convolutions need channels innermost); io FLOAT/HALF/BFLOAT16/INT8, compute FLOAT (int8: INT32, and the int32 accumulator is the
// output), intermediate FLOAT; cross-correlation, dilation 1. Callers pass the padded sizes.
// Inputs are random as the harness draws them (standard normal, filters scaled by 1/sqrt(C*R*S);
// int8 integers in [-64, 64)), never zeros, which would run faster.
// Timing (loop_timing.h): a host loop of executes (DeepBench's way) and the same executes captured
// in a CUDA graph, each for at least SECONDS; graph NaN where an engine cannot be captured.
//
// Build: build_native.sh (needs the cudnn-frontend headers, cudnn.h, libcudnn and nvrtc.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "loop_lines.h"
#include "loop_timing.h"

namespace fe = cudnn_frontend;

static const int MAX_CANDIDATES = 12;             // as kernels/backends/cudnn/engine_choice.py: plans tried per direction
static const int64_t WORKSPACE_LIMIT = int64_t(1) << 30;  // as engine_choice.py (DeepBench's int8 workspace)

struct Types {
  fe::DataType_t io, compute, output;
  size_t io_bytes, output_bytes;
  bool channels_last;
  std::vector<fe::NumericalNote_t> excluded_notes;  // engines that would not compute in this precision
};

static bool types_of(const std::string& precision, Types& t) {
  using D = fe::DataType_t;
  if (precision == "fp32")
    t = {D::FLOAT, D::FLOAT, D::FLOAT, 4, 4, false,
         {fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS}};
  else if (precision == "tf32") t = {D::FLOAT, D::FLOAT, D::FLOAT, 4, 4, false, {}};
  else if (precision == "fp16") t = {D::HALF, D::FLOAT, D::HALF, 2, 2, true, {}};
  else if (precision == "bf16") t = {D::BFLOAT16, D::FLOAT, D::BFLOAT16, 2, 2, true, {}};
  else if (precision == "int8") t = {D::INT8, D::INT32, D::INT32, 1, 4, true, {}};
  else return false;
  return true;
}

struct Problem {
  std::string precision, direction, engine, layout;  // layout "" : the precision's (types_of)
  int64_t n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w;
  double seconds;
  std::string fields;  // the input fields, echoed at the start of every output line
};

static const int FIELDS = 15;

static bool parse(const std::string& line, Problem& p) {
  std::istringstream in(line);
  if (!(in >> p.precision >> p.direction >> p.n >> p.c >> p.h >> p.w >> p.k >> p.r >> p.s >> p.pad_h >> p.pad_w >>
        p.stride_h >> p.stride_w >> p.engine >> p.seconds))
    return false;
  if (!(in >> p.layout)) p.layout.clear();  // optional
  p.fields = loop_lines::echoed(line, FIELDS);  // as given, not as parsed: the caller finds its lines by them
  return true;
}

// "ID" or "ID:KNOB=V,..." with numeric knob types; false if malformed.
static bool parse_engine(const std::string& spec, int64_t& id, std::unordered_map<fe::KnobType_t, int64_t>& knobs) {
  try {
    size_t used;
    id = std::stoll(spec, &used);
    if (used == spec.size()) return true;
    if (spec[used] != ':') return false;
    std::istringstream items(spec.substr(used + 1));
    for (std::string item; std::getline(items, item, ',');) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos) return false;
      size_t key_used, value_used;
      const int64_t key = std::stoll(item.substr(0, eq), &key_used);
      const int64_t value = std::stoll(item.substr(eq + 1), &value_used);
      if (key_used != eq || value_used != item.size() - eq - 1) return false;
      knobs[fe::KnobType_t(key)] = value;
    }
    return true;
  } catch (const std::exception&) {  // std::stoll: not a number
    return false;
  }
}

// Knobs as the output prints them: `-`, or `k=v,...` by ascending numeric knob type.
static std::string knob_text(const std::unordered_map<fe::KnobType_t, int64_t>& knobs) {
  if (knobs.empty()) return "-";
  std::map<int64_t, int64_t> sorted;
  for (const auto& [key, value] : knobs) sorted[int64_t(key)] = value;
  std::string out;
  for (const auto& [key, value] : sorted)
    out += (out.empty() ? "" : ",") + std::to_string(key) + "=" + std::to_string(value);
  return out;
}

static std::vector<int64_t> strides(const std::vector<int64_t>& d, bool channels_last) {  // d: (N, C, H, W)
  return channels_last ? std::vector<int64_t>{d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}
                       : std::vector<int64_t>{d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

static size_t elements(const std::vector<int64_t>& d) { return size_t(d[0]) * d[1] * d[2] * d[3]; }

using loop_lines::DeviceMemory;

template <typename T>
static std::string upload(DeviceMemory& mem, void** p, size_t n, float scale, unsigned seed) {
  std::vector<T> host(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, int8_t>)
      host[i] = int8_t(std::floor(loop_timing::uniform_at(i, seed) * loop_timing::INT8_RANGE));
    else host[i] = T(loop_timing::normal_at(i, seed) * scale);
  }
  std::string error = mem.alloc(p, n * sizeof(T));
  if (!error.empty()) return error;
  const cudaError_t e = cudaMemcpy(*p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  return e == cudaSuccess ? "" : std::string("cudaMemcpy: ") + cudaGetErrorString(e);
}

// A device tensor of random values of the io type (scale: floats only; int8 are never scaled).
static std::string random_tensor(DeviceMemory& mem, void** p, size_t n, fe::DataType_t io, float scale, unsigned seed) {
  switch (io) {
    case fe::DataType_t::FLOAT: return upload<float>(mem, p, n, scale, seed);
    case fe::DataType_t::HALF: return upload<__half>(mem, p, n, scale, seed);
    case fe::DataType_t::BFLOAT16: return upload<__nv_bfloat16>(mem, p, n, scale, seed);
    default: return upload<int8_t>(mem, p, n, scale, seed);
  }
}

struct Candidate {
  int64_t index, engine_id, workspace;
  std::unordered_map<fe::KnobType_t, int64_t> knobs;
  std::string name;
};

// A frontend call that may fail for this problem: on failure, return why from the enclosing function.
#define TRY_FE(what, expr) do { auto s_ = (expr); \
  if (s_.is_bad()) return std::string(what) + ": " + s_.get_message(); } while (0)

// The plan at `index` built, with its engine, knobs, name and workspace; "" or why not.
static std::string describe(fe::graph::Graph& g, int64_t index, Candidate& c) {
  TRY_FE("build_plan_at_index", g.build_plan_at_index(index));
  TRY_FE("get_engine_and_knobs_at_index", g.get_engine_and_knobs_at_index(index, c.engine_id, c.knobs));
  TRY_FE("get_plan_name_at_index", g.get_plan_name_at_index(index, c.name));
  TRY_FE("get_workspace_size_plan_at_index", g.get_workspace_size_plan_at_index(index, c.workspace));
  for (char& ch : c.name)
    if (ch == ' ') ch = '_';  // one field of the output line
  c.index = index;
  return "";
}

// The plans to time, in cuDNN's order; "" or why there are none.
static std::string candidates_of(fe::graph::Graph& g, const Problem& p, const Types& t, std::vector<Candidate>& out) {
  if (p.engine.rfind("eng", 0) == 0) {  // a plan's name (every knob cuDNN set): find it among the heuristics' plans
    TRY_FE("create_execution_plans", g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}));
    for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
      Candidate c;
      if (describe(g, i, c).empty() && c.name == p.engine) {
        out.push_back(c);
        return "";
      }
    }
    return "cuDNN's heuristics offer no plan named " + p.engine + " for this convolution here";
  }
  if (p.engine != "-") {
    int64_t id;
    std::unordered_map<fe::KnobType_t, int64_t> knobs;
    if (!parse_engine(p.engine, id, knobs)) return "malformed ENGINE (ID or ID:KNOB=V,... with numeric knob types)";
    TRY_FE("create_execution_plan", g.create_execution_plan(id, knobs));
    Candidate c;
    const std::string error = describe(g, g.get_execution_plan_count() - 1, c);
    if (!error.empty()) return "engine " + p.engine + " cannot run this convolution here: " + error;
    out.push_back(c);
    return "";
  }
  TRY_FE("create_execution_plans", g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}));
  g.deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
  if (!t.excluded_notes.empty()) g.deselect_numeric_notes(t.excluded_notes);
  g.deselect_workspace_greater_than(WORKSPACE_LIMIT);
  std::set<std::string> seen;  // modes A and FALLBACK overlap
  for (int64_t i = 0; i < g.get_execution_plan_count() && int(out.size()) < MAX_CANDIDATES; ++i) {
    Candidate c;
    if (!describe(g, i, c).empty()) continue;  // deselected, or a plan this GPU cannot build: not a candidate
    if (seen.insert(c.name).second) out.push_back(c);
  }
  return out.empty() ? "cuDNN offers no engine for this convolution" : "";
}

// Build, plan and time one problem, printing a line per engine; "" or why it cannot run.
static std::string run_problem(cudnnHandle_t handle, loop_timing::Timer& timer, const Problem& p, unsigned& seed) {
  Types t;
  if (!types_of(p.precision, t)) return "unknown precision (fp32|tf32|fp16|bf16|int8)";
  if (p.layout == "nhwc" || p.layout == "nchw") t.channels_last = p.layout == "nhwc";
  else if (!p.layout.empty()) return "unknown layout (nchw|nhwc)";
  if (p.precision == "int8" && !t.channels_last) return "cuDNN's int8 convolution runs NHWC only";
  if (p.direction != "fwd" && p.direction != "bwd_data" && p.direction != "bwd_filter")
    return "unknown direction (fwd|bwd_data|bwd_filter)";
  if (p.precision == "int8" && p.direction != "fwd") return "cuDNN has no int8 backward convolution";
  for (int64_t v : {p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.stride_h, p.stride_w})
    if (v <= 0) return "sizes and strides must be positive";
  if (p.pad_h < 0 || p.pad_w < 0) return "padding must not be negative";
  const int64_t out_h = (p.h + 2 * p.pad_h - p.r) / p.stride_h + 1, out_w = (p.w + 2 * p.pad_w - p.s) / p.stride_w + 1;
  if (out_h <= 0 || out_w <= 0) return "the filter is larger than the padded input";
  const std::vector<int64_t> x_dims{p.n, p.c, p.h, p.w}, w_dims{p.k, p.c, p.r, p.s}, y_dims{p.n, p.k, out_h, out_w};

  fe::graph::Graph g;
  g.set_io_data_type(t.io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(t.compute);
  auto tensor = [&](const char* name, const std::vector<int64_t>& dims) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim(dims)
                        .set_stride(strides(dims, t.channels_last)).set_data_type(t.io));
  };
  const std::vector<int64_t> padding{p.pad_h, p.pad_w}, stride{p.stride_h, p.stride_w}, dilation{1, 1};
  // Each direction's two inputs (with their dims and the scale of their random values) and output.
  struct Role { std::shared_ptr<fe::graph::Tensor_attributes> tensor; std::vector<int64_t> dims; float scale; };
  std::vector<Role> inputs;
  Role output;
  const float w_scale = 1.0f / std::sqrt(float(p.c * p.r * p.s));
  if (p.direction == "fwd") {
    inputs = {{tensor("X", x_dims), x_dims, 1.0f}, {tensor("W", w_dims), w_dims, w_scale}};
    output = {g.conv_fprop(inputs[0].tensor, inputs[1].tensor, fe::graph::Conv_fprop_attributes()
                  .set_padding(padding).set_stride(stride).set_dilation(dilation)), y_dims, 0.0f};
  } else if (p.direction == "bwd_data") {
    inputs = {{tensor("DY", y_dims), y_dims, 1.0f}, {tensor("W", w_dims), w_dims, w_scale}};
    output = {g.conv_dgrad(inputs[0].tensor, inputs[1].tensor, fe::graph::Conv_dgrad_attributes()
                  .set_padding(padding).set_stride(stride).set_dilation(dilation)), x_dims, 0.0f};
  } else {
    inputs = {{tensor("X", x_dims), x_dims, 1.0f}, {tensor("DY", y_dims), y_dims, 1.0f}};
    output = {g.conv_wgrad(inputs[1].tensor, inputs[0].tensor, fe::graph::Conv_wgrad_attributes()
                  .set_padding(padding).set_stride(stride).set_dilation(dilation)), w_dims, 0.0f};
  }
  output.tensor->set_output(true).set_data_type(t.output).set_dim(output.dims)
      .set_stride(strides(output.dims, t.channels_last));
  TRY_FE("validate", g.validate());
  TRY_FE("build_operation_graph", g.build_operation_graph(handle));

  std::vector<Candidate> candidates;
  std::string error = candidates_of(g, p, t, candidates);
  if (!error.empty()) return error;

  DeviceMemory mem;
  std::unordered_map<int64_t, void*> pack;  // tensor uid -> device memory, made once for every call
  for (const Role& role : inputs) {
    void* ptr;
    error = random_tensor(mem, &ptr, elements(role.dims), t.io, role.scale, seed++);
    if (!error.empty()) return error;
    pack[role.tensor->get_uid()] = ptr;
  }
  void* out_ptr;
  error = mem.alloc(&out_ptr, elements(output.dims) * t.output_bytes);
  if (!error.empty()) return error;
  pack[output.tensor->get_uid()] = out_ptr;
  int64_t workspace_bytes = 0;
  for (const Candidate& c : candidates) workspace_bytes = std::max(workspace_bytes, c.workspace);
  void* workspace;
  error = mem.alloc(&workspace, size_t(workspace_bytes));
  if (!error.empty()) return error;

  for (const Candidate& c : candidates) {
    std::string reason;
    auto call = [&]() {
      auto s = g.execute_plan_at_index(handle, pack, workspace, c.index);
      if (s.is_bad()) reason = s.get_message();
      return s.is_good();
    };
    loop_timing::Times times;
    const bool timed = timer.time_calls(call, 1000.0 * p.seconds, times);
    std::printf("%s %lld %s %s ", p.fields.c_str(), (long long)c.engine_id, knob_text(c.knobs).c_str(), c.name.c_str());
    if (timed) std::printf("%.4f %.4f\n", times.stream_us, times.graph_us);
    else std::printf("error execute: %s\n", reason.empty() ? "the calls failed" : reason.c_str());
    std::fflush(stdout);
  }
  return "";
}

// Where the library is called more than once in a process, LOOP_KEEP names what the first call makes and
// later calls reuse instead of making their own: "handle" (the cuDNN handle), "stream" (the timer's
// stream; its events are new), "timer" (the stream and the events) or "all" (the handle and the timer):
// conv_process_probe.py --passes (at 9450c78), which of them a later call's figures follow.
static bool kept(const char* what) {
  const char* keep = std::getenv("LOOP_KEEP");
  return keep && (std::strcmp(keep, what) == 0 || (std::strcmp(keep, "all") == 0 && std::strcmp(what, "stream")));
}

// Which streams a process holds besides the timer's (conv_process_probe.py --passes, at 9450c78): LOOP_IDLE_STREAM makes one
// more non-blocking stream that is never used, on the first call only: "before" the timer's stream (kept), "after"
// it (kept), or "destroyed" (made and destroyed before the timer's); or one that carries a little work (a 4-byte
// memset, waited for) before the timer's stream is made: "busy" (kept) or "busy-destroyed"; "legacy" puts that
// memset on the legacy default stream instead. LOOP_STREAM=per-thread times on the per-thread default stream
// instead of a stream of the timer's own (no stream is made at all).
static cudaStream_t idle_stream(const char* when) {
  static bool done = false;
  const char* idle = std::getenv("LOOP_IDLE_STREAM");
  if (done || !idle) return nullptr;
  const bool worked = std::strncmp(idle, "busy", 4) == 0 || std::strcmp(idle, "legacy") == 0;
  if (std::strcmp(worked ? "before" : idle, when) != 0) return nullptr;  // the busy ones come before the timer's
  done = true;
  cudaStream_t s = nullptr;
  const bool legacy = std::strcmp(idle, "legacy") == 0;
  if (!legacy) CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (worked) {  // a little work on that stream, finished
    void* word;
    CHECK_CUDA(cudaMalloc(&word, 4));
    CHECK_CUDA(cudaMemsetAsync(word, 0, 4, legacy ? cudaStreamLegacy : s));
    CHECK_CUDA(cudaStreamSynchronize(legacy ? cudaStreamLegacy : s));
    CHECK_CUDA(cudaFree(word));
  }
  const bool destroy = std::strcmp(when, "destroyed") == 0 || std::strcmp(idle, "busy-destroyed") == 0;
  if (destroy) CHECK_CUDA(cudaStreamDestroy(s));
  return s;
}

static cudaStream_t timer_stream(cudaStream_t kept_stream) {
  const char* which = std::getenv("LOOP_STREAM");
  return which && std::strcmp(which, "per-thread") == 0 ? cudaStreamPerThread : kept_stream;
}

// Every problem on stdin, timed; the process's exit status.
static int run_stdin() {
  std::cin.clear();  // a library call after an earlier one: stdin may be a new file (its EOF is not ours)
  std::clearerr(stdin);
  static cudnnHandle_t kept_handle = nullptr;
  static cudaStream_t kept_stream = nullptr;
  static loop_timing::Timer* kept_timer = nullptr;
  const bool keep_handle = kept("handle"), keep_timer = kept("timer");
  cudnnHandle_t handle = keep_handle ? kept_handle : nullptr;
  cudnnStatus_t status = handle ? CUDNN_STATUS_SUCCESS : cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate: %s\n", cudnnGetErrorString(status));
    return 1;
  }
  if (keep_handle) kept_handle = handle;
  std::fprintf(stderr, "# cudnn %zu\n", cudnnGetVersion());
  std::unique_ptr<loop_timing::Timer> own_timer;
  idle_stream("before");
  idle_stream("destroyed");
  if (kept("stream") && !kept_stream) CHECK_CUDA(cudaStreamCreateWithFlags(&kept_stream, cudaStreamNonBlocking));
  if (keep_timer && !kept_timer) kept_timer = new loop_timing::Timer();  // kept for the process's life
  if (!keep_timer) own_timer = std::make_unique<loop_timing::Timer>(timer_stream(kept_stream));
  loop_timing::Timer& timer = keep_timer ? *kept_timer : *own_timer;
  idle_stream("after");
  status = cudnnSetStream(handle, timer.stream);
  if (status != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnSetStream: %s\n", cudnnGetErrorString(status));
    return 1;
  }
  unsigned seed = 1;
  loop_lines::each_line(FIELDS, [&](const std::string& line) {
    Problem p;
    return parse(line, p) ? run_problem(handle, timer, p, seed) : std::string("malformed line");
  });
  if (!keep_handle) cudnnDestroy(handle);
  return 0;
}

#ifdef CONV_LOOP_LIBRARY
// Built as a library (build_native.sh: libconv_loop.so), the same loop runs inside another process
// (tests/benchmarks/loop_library.py), reading that process's stdin and writing its stdout.
extern "C" int conv_loop_run_stdin() { return run_stdin(); }
#else
int main() { return run_stdin(); }
#endif
