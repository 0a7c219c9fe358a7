// How the native loops (gemm_loop.cu, conv_loop.cpp) time a library call, so that both time alike.
//
// After WARMUP calls, trials of `calls` back-to-back calls between two CUDA events (calls chosen so
// a trial lasts >= MIN_TRIAL_MS), at least MIN_TRIALS of them and for at least the seconds the
// caller asks (the side-by-side passes how long the harness measured that call, so both figures
// are medians over as long a stretch of the GPU's power states); the median trial is reported.
// Two ways, one after the other:
//   stream  `calls` calls from a host loop (DeepBench's way). Launch-bound for calls shorter than
//           the host's launch rate (~5-8 us), so an upper bound there.
//   graph   the same `calls` calls captured once in a CUDA graph, the graph replayed per trial (the
//           harness's way, without Python). NaN where the library's call cannot be captured.
// Stream first, unless LOOP_GRAPH_FIRST is set (GRAPH_FIRST_ENV): a test of whether the way timed second,
// after the first's seconds of full load, runs at a lower clock on a power-capped GPU than the harness's
// graph, timed after only its check and warm-up calls. On H100s the order did not decide the fp16 GEMM
// comparison (tests/benchmarks/results/fp16-gemm-clocks-h100).
// Each trial also reads the SM clock through NVML (SmClock) after the trial is enqueued and before it is
// waited for, as the harness reads it beside its samples (kernels/timing/clocks.py); each way reports
// the median reading, so the side-by-side can tell a different problem from the same problem at another
// clock on a power-capped GPU.
// Host-only code (cuda_runtime API), so that a plain C++ file can include it. With LOOP_GRAPH_DOT set,
// the graph is also written as a DOT file (GRAPH_DOT_ENV below).
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

// For what must work for the program to mean anything (stream, events): a failure ends the program.
#define CHECK_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); std::exit(1); } } while (0)

namespace loop_timing {

const int WARMUP = 5;
const int MIN_TRIALS = 7;
const float MIN_TRIAL_MS = 2.0f;
const int MAX_CALLS = 4000;
// Where set, each captured graph is written there as a DOT file (cudaGraphDebugDotPrint, verbose: every
// node's parameters and launch attributes) before it is instantiated (conv_process_probe.py --graphs, at 9450c78, compared the two sides' graphs).
const char* const GRAPH_DOT_ENV = "LOOP_GRAPH_DOT";
// Where set (non-empty), the graph is timed before the host loop (native_side_by_side.py --graph-first).
const char* const GRAPH_FIRST_ENV = "LOOP_GRAPH_FIRST";

// Uniform values in [-1, 1) from a per-element hash: random data, never zeros or constants, the
// same on the host (conv_loop fills there) and the device (gemm_loop's fill kernel).
__host__ __device__ inline float uniform_at(size_t i, unsigned seed) {
  unsigned h = unsigned(i) * 2654435761u ^ (seed * 0x9e3779b9u);
  h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
  return (h & 0xffffff) / float(0x800000) - 1.0f;
}

// Standard normal values (Box-Muller on two hashed uniforms): the harness draws its float inputs
// with torch.randn, and on a power-limited GPU the values' bits set the power a large GEMM draws,
// hence its clock and time (uniform [-1, 1) inputs ran the H100's large fp16 GEMMs up to 5% slower).
__host__ __device__ inline float normal_at(size_t i, unsigned seed) {
  const float u1 = (uniform_at(i, seed) + 1.0f) * 0.5f + 0.5f / float(0x1000000);  // (0, 1]: log is finite
  const float u2 = (uniform_at(i, seed ^ 0x5bd1e995u) + 1.0f) * 0.5f;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

const float INT8_RANGE = 64.0f;  // int8 inputs are integers in [-64, 64), as the harness draws them

struct Times {
  float stream_us = NAN;
  int calls = 0;
  float graph_us = NAN;  // NaN where the calls could not be captured in a graph
  float stream_mhz = NAN;  // median SM clock read during the trials each way; NaN without NVML
  float graph_mhz = NAN;
};

// The SM clock of the CUDA device in use, through the driver's NVML library. Loaded at run time
// (dlopen) rather than linked: the loops then need neither nvml.h nor a link-time libnvidia-ml, and
// a machine without NVML still times, with NaN clocks. The few NVML entry points are declared here
// by hand (nvml.h: nvmlReturn_t is an int enum, NVML_SUCCESS 0; nvmlDevice_t an opaque pointer).
class SmClock {
 public:
  SmClock() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_info_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    int device = 0;
    char bus_id[32];  // "dddd:bb:dd.f": the one name CUDA and NVML share for a device
    if (!init || !by_bus || !clock_info_ || init() != NVML_SUCCESS || cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess || by_bus(bus_id, &device_) != NVML_SUCCESS)
      device_ = nullptr;
  }
  // The SM clock now, in MHz; NaN where NVML cannot say.
  float mhz() const {
    unsigned value = 0;
    return device_ && clock_info_(device_, NVML_CLOCK_SM, &value) == NVML_SUCCESS ? float(value) : NAN;
  }

 private:
  static const int NVML_SUCCESS = 0;
  static const int NVML_CLOCK_SM = 1;  // nvmlClockType_t: GRAPHICS 0, SM 1, MEM 2, VIDEO 3
  void* device_ = nullptr;
  int (*clock_info_)(void*, int, unsigned*) = nullptr;
};

// The median of `values` (sorted in place), NaN left out; NaN if none is left.
inline float median_of(std::vector<float>& values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](float v) { return std::isnan(v); }), values.end());
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One stream and a pair of events for the whole program; `call` functions enqueue on `stream`: a
// stream of its own, or `existing` (which its caller keeps and destroys).
class Timer {
 public:
  cudaStream_t stream;

  explicit Timer(cudaStream_t existing = nullptr) : stream(existing), owns_stream_(existing == nullptr) {
    if (owns_stream_) CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&start_));
    CHECK_CUDA(cudaEventCreate(&stop_));
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    if (owns_stream_) cudaStreamDestroy(stream);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // The us per call of `calls` calls of `call` (which returns false when the library refuses
  // it), both ways; false if a call failed outside the graph capture.
  template <typename Call>
  bool time_calls(Call call, double min_ms, Times& out) {
    int calls = 1;
    auto loop = [&]() {
      for (int i = 0; i < calls; ++i)
        if (!call()) return false;
      return true;
    };
    for (int i = 0; i < WARMUP; ++i)
      if (!call()) return false;
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (;;) {  // calibrate: calls per trial so that a trial lasts at least MIN_TRIAL_MS
      float ms;
      if (!trial_ms(loop, ms)) return false;
      if (ms >= MIN_TRIAL_MS || calls >= MAX_CALLS) break;
      calls = std::min(MAX_CALLS, std::max(2 * calls, int(calls * MIN_TRIAL_MS / std::max(ms, 1e-3f)) + 1));
    }
    out.calls = calls;
    const char* first = std::getenv(GRAPH_FIRST_ENV);
    const bool graph_first = first && *first;
    if (graph_first) out.graph_us = graph_us(loop, calls, min_ms, out.graph_mhz);
    if (!median_us(loop, calls, min_ms, out.stream_us, out.stream_mhz)) return false;
    if (!graph_first) out.graph_us = graph_us(loop, calls, min_ms, out.graph_mhz);
    return true;
  }

 private:
  bool owns_stream_;
  cudaEvent_t start_, stop_;
  SmClock clock_;

  // The milliseconds between two events around what `trial` enqueues; false if it failed. `mhz`
  // (where given): the SM clock read after the trial is enqueued, while the GPU runs it.
  template <typename Trial>
  bool trial_ms(Trial trial, float& ms, float* mhz = nullptr) {
    CHECK_CUDA(cudaEventRecord(start_, stream));
    const bool ok = trial();
    CHECK_CUDA(cudaEventRecord(stop_, stream));
    if (mhz) *mhz = clock_.mhz();
    CHECK_CUDA(cudaEventSynchronize(stop_));  // also when a call failed: what was enqueued drains first
    CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ok;
  }

  // The median us per call over trials of `trial` (which enqueues `calls` calls): at least
  // MIN_TRIALS trials and at least min_ms of them; `mhz`: the median SM clock read during them.
  template <typename Trial>
  bool median_us(Trial trial, int calls, double min_ms, float& us, float& mhz) {
    std::vector<float> per_call, clocks;
    for (double spent_ms = 0.0; int(per_call.size()) < MIN_TRIALS || spent_ms < min_ms;) {
      float ms, trial_mhz;
      if (!trial_ms(trial, ms, &trial_mhz)) return false;
      per_call.push_back(ms * 1000.0f / calls);
      clocks.push_back(trial_mhz);
      spent_ms += ms;
    }
    us = median_of(per_call);
    mhz = median_of(clocks);
    return true;
  }

  // The same calls captured once in a graph and replayed per trial; NaN (with the reason on
  // stderr) where capture fails. Capture errors are not sticky: the stream stays usable.
  template <typename Loop>
  float graph_us(Loop loop, int calls, double min_ms, float& mhz) {
    float us = NAN;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) {
      const bool enqueued = loop();
      e = cudaStreamEndCapture(stream, &graph);  // always ends the capture, also after a failed call
      if (!enqueued && e == cudaSuccess) e = cudaErrorStreamCaptureInvalidated;
    }
    if (const char* dot = std::getenv(GRAPH_DOT_ENV); e == cudaSuccess && dot && *dot)
      (void)cudaGraphDebugDotPrint(graph, dot, cudaGraphDebugDotFlagsVerbose);  // its nodes, for a diff
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (e == cudaSuccess) {
      auto replay = [&]() { return cudaGraphLaunch(exec, stream) == cudaSuccess; };
      if (!replay() || !median_us(replay, calls, min_ms, us, mhz)) us = NAN;  // the first launch uploads the graph
    } else {
      std::fprintf(stderr, "# graph capture failed (%s): graph time NaN\n", cudaGetErrorString(e));
      (void)cudaGetLastError();
    }
    if (exec) CHECK_CUDA(cudaGraphExecDestroy(exec));
    if (graph) CHECK_CUDA(cudaGraphDestroy(graph));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return us;
  }
};

}  // namespace loop_timing
