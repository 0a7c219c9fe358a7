// A plain native loop over cublasGemmEx, the reference the fidelity benchmark compares the
// harness with. It makes DeepBench's call: column-major C (m x n) = op(A) op(B), alpha = 1,
// beta = 0, lda = (transa ? k : m), ldb = (transb ? n : k), ldc = m.
//
// Input on stdin, one problem a line:  PRECISION TRANSA TRANSB M N K [SECONDS]   (fp32|tf32|fp16|bf16, N|T)
// Output, one line each:               PRECISION TRANSA TRANSB M N K US_PER_CALL CALLS US_PER_CALL_GRAPH
// Timing: after WARMUP calls, trials of `calls` back-to-back launches between two CUDA events
// (calls chosen so a trial lasts >= MIN_TRIAL_MS), at least MIN_TRIALS of them and for at least
// SECONDS (the line's, else the first argument's; default 0): the fidelity benchmark passes how long
// the harness measured that kernel, so both figures are medians over as long a stretch of the
// GPU's power states; the median trial is printed. Two ways, one after the other:
//   stream  `calls` launches from a host loop (DeepBench's way). Launch-bound for kernels shorter
//           than the host's launch rate (~5-8 us), so an upper bound there.
//   graph   the same `calls` launches captured once in a CUDA graph, the graph replayed per trial
//           (the harness's way, without Python): what is left above the profiler's kernel time is
//           the GPU's own gap between two dependent kernels.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 gemm_loop.cu -lcublas -o gemm_loop
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#define CHECK_CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); std::exit(1); } } while (0)
#define CHECK_CUBLAS(x) do { cublasStatus_t s = (x); if (s != CUBLAS_STATUS_SUCCESS) { \
  std::fprintf(stderr, "cuBLAS error %d at %s:%d\n", int(s), __FILE__, __LINE__); std::exit(1); } } while (0)

static const int WARMUP = 5;
static const int MIN_TRIALS = 7;
static const float MIN_TRIAL_MS = 2.0f;
static const int MAX_CALLS = 4000;
static const size_t WORKSPACE_BYTES = size_t(32) << 20;  // cuBLAS's own default on Hopper, given explicitly so
                                                         // that graph capture allocates nothing

// Uniform values in [-1, 1) from a per-element hash: random data, never zeros or constants.
template <typename T>
__global__ void fill(T* p, size_t n, unsigned seed) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  unsigned h = unsigned(i) * 2654435761u ^ (seed * 0x9e3779b9u);
  h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
  float v = (h & 0xffffff) / float(0x800000) - 1.0f;
  p[i] = T(v);
}

template <typename T>
static void fill_random(void* p, size_t n, unsigned seed) {
  unsigned blocks = unsigned((n + 255) / 256);
  fill<T><<<blocks, 256>>>(static_cast<T*>(p), n, seed);
  CHECK_CUDA(cudaGetLastError());
}

// The milliseconds between two events on `stream` around what `trial` enqueues there.
template <typename Trial>
static float trial_ms(Trial trial, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop) {
  CHECK_CUDA(cudaEventRecord(start, stream));
  trial();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

// The median us per call over trials of `trial` (which enqueues `calls` calls on `stream`): at least
// MIN_TRIALS trials and at least min_ms of them.
template <typename Trial>
static float median_us(Trial trial, int calls, double min_ms, cudaStream_t stream, cudaEvent_t start,
                       cudaEvent_t stop) {
  std::vector<float> per_call;
  for (double spent_ms = 0.0; int(per_call.size()) < MIN_TRIALS || spent_ms < min_ms;) {
    const float ms = trial_ms(trial, stream, start, stop);
    per_call.push_back(ms * 1000.0f / calls);
    spent_ms += ms;
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

int main(int argc, char** argv) {
  const double min_time_ms = argc > 1 ? 1000.0 * std::atof(argv[1]) : 0.0;
  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUBLAS(cublasSetStream(handle, stream));
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, WORKSPACE_BYTES));
  CHECK_CUBLAS(cublasSetWorkspace(handle, workspace, WORKSPACE_BYTES));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::string line;
  unsigned seed = 1;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string prec, ta, tb;
    long m, n, k;
    if (!(in >> prec >> ta >> tb >> m >> n >> k)) continue;
    double seconds;
    const double min_ms = (in >> seconds) ? 1000.0 * seconds : min_time_ms;
    cudaDataType_t dt;
    cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    size_t elem;
    if (prec == "fp32") { dt = CUDA_R_32F; elem = 4; }
    else if (prec == "tf32") { dt = CUDA_R_32F; elem = 4; ct = CUBLAS_COMPUTE_32F_FAST_TF32; }
    else if (prec == "fp16") { dt = CUDA_R_16F; elem = 2; }
    else if (prec == "bf16") { dt = CUDA_R_16BF; elem = 2; }
    else { std::fprintf(stderr, "unknown precision %s\n", prec.c_str()); return 2; }
    // As the harness sets cuBLAS up (kernels/backends/pytorch/context.py): half-precision products accumulate
    // and reduce in fp32, so split-K partial sums may not be reduced in fp16/bf16 (the default allows it, and
    // cuBLAS then may pick another kernel than for the harness).
    CHECK_CUBLAS(cublasSetMathMode(handle, elem == 2 ? cublasMath_t(CUBLAS_DEFAULT_MATH |
                                                                     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                                                     : CUBLAS_DEFAULT_MATH));
    cublasOperation_t opa = ta == "T" ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = tb == "T" ? CUBLAS_OP_T : CUBLAS_OP_N;
    long lda = opa == CUBLAS_OP_T ? k : m, ldb = opb == CUBLAS_OP_T ? n : k, ldc = m;
    void *a, *b, *c;
    CHECK_CUDA(cudaMalloc(&a, size_t(m) * k * elem));
    CHECK_CUDA(cudaMalloc(&b, size_t(k) * n * elem));
    CHECK_CUDA(cudaMalloc(&c, size_t(m) * n * elem));
    if (elem == 4) { fill_random<float>(a, size_t(m) * k, seed++); fill_random<float>(b, size_t(k) * n, seed++); }
    else if (dt == CUDA_R_16F) { fill_random<__half>(a, size_t(m) * k, seed++); fill_random<__half>(b, size_t(k) * n, seed++); }
    else { fill_random<__nv_bfloat16>(a, size_t(m) * k, seed++); fill_random<__nv_bfloat16>(b, size_t(k) * n, seed++); }
    CHECK_CUDA(cudaDeviceSynchronize());  // the fills ran on the default stream, the calls run on `stream`
    float alpha = 1.0f, beta = 0.0f;
    auto call = [&]() {
      CHECK_CUBLAS(cublasGemmEx(handle, opa, opb, int(m), int(n), int(k), &alpha, a, dt, int(lda), b, dt, int(ldb),
                                &beta, c, dt, int(ldc), ct, CUBLAS_GEMM_DEFAULT));
    };
    for (int i = 0; i < WARMUP; ++i) call();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    // Calibrate: calls per trial so a trial lasts at least MIN_TRIAL_MS.
    int calls = 1;
    auto loop = [&]() { for (int i = 0; i < calls; ++i) call(); };
    for (;;) {
      const float ms = trial_ms(loop, stream, start, stop);
      if (ms >= MIN_TRIAL_MS || calls >= MAX_CALLS) break;
      calls = std::min(MAX_CALLS, std::max(2 * calls, int(calls * MIN_TRIAL_MS / std::max(ms, 1e-3f)) + 1));
    }
    const float stream_us = median_us(loop, calls, min_ms, stream, start, stop);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    loop();
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    auto replay = [&]() { CHECK_CUDA(cudaGraphLaunch(exec, stream)); };
    replay();  // the first launch uploads the graph
    const float graph_us = median_us(replay, calls, min_ms, stream, start, stop);
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    std::printf("%s %s %s %ld %ld %ld %.4f %d %.4f\n", prec.c_str(), ta.c_str(), tb.c_str(), m, n, k, stream_us, calls,
                graph_us);
    std::fflush(stdout);
    CHECK_CUDA(cudaFree(a));
    CHECK_CUDA(cudaFree(b));
    CHECK_CUDA(cudaFree(c));
  }
  CHECK_CUBLAS(cublasDestroy(handle));
  CHECK_CUDA(cudaFree(workspace));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
