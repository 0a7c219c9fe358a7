// A plain native loop over cublasGemmEx, the reference the fidelity benchmark and the native
// side-by-side compare the harness with. It makes DeepBench's call: column-major C (m x n) =
// op(A) op(B), alpha = 1, beta = 0, lda = (transa ? k : m), ldb = (transb ? n : k), ldc = m, on
// the problem as given (callers pass DeepBench's padded shape; nothing is padded here).
//
// Input on stdin, one problem a line:  PRECISION TRANSA TRANSB M N K [SECONDS [MATH [REST [INPUTS]]]]
//                                      (fp32|tf32|fp16|fp16acc16|bf16|int8; N|T; seconds; strict|default; seconds;
//                                       normal|uniform|zeros|deepbench)
// Output, one line each:               PRECISION TRANSA TRANSB M N K US_PER_CALL CALLS US_PER_CALL_GRAPH MHZ MHZ_GRAPH
//                                      (MHZ: the median SM clock during each way's trials, nan without NVML)
//                      or, on failure: PRECISION TRANSA TRANSB M N K error REASON   (and the next problem runs)
// On stderr first: `# cublas VERSION`, the library this binary loaded.
// MATH (fp16/bf16 only): `strict` (the default) forbids split-K to reduce partial sums in fp16/bf16
// (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, as the PyTorch backend sets cuBLAS up,
// kernels/backends/pytorch/context.py); `default` is cuBLAS's default math mode, which allows it (a
// handle left as created, as the cuBLAS backend's); the two may pick different kernels.
// Types: fp32 A/B/C float, fp32 compute; tf32 the same with CUBLAS_COMPUTE_32F_FAST_TF32; fp16/bf16
// A/B/C in that type, fp32 compute; fp16acc16 A/B/C half with half compute and half alpha/beta (the call
// DeepBench's gemm_bench made for half: CUDA_R_16F compute); int8 A/B int8, C int32, CUBLAS_COMPUTE_32I,
// alpha/beta int32.
// INPUTS (kernels/inputs.py's --inputs): normal (the default: floats standard normal, int8 integers in
// [-64, 64), as the harness draws them), uniform (floats in [0, 1); int8 as normal), zeros, or deepbench
// (what DeepBench's binaries drew: zeros for types narrower than 32 bits, uniform [0, 1) for float).
// Timing (loop_timing.h): a host loop of launches (DeepBench's way) and the same launches in a CUDA
// graph, each for at least SECONDS (the line's, else the first argument's; default 0). REST: seconds
// the GPU idles after the inputs are made and before the first call, as it does while the harness
// checks a kernel and DeepBench's benchmark fills its inputs (native_side_by_side.py --rest-as-harness).
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 gemm_loop.cu -lcublas -ldl -o gemm_loop   (build_native.sh; with
// -shared -DGEMM_LOOP_LIBRARY, libgemm_loop.so: the same loop inside a Python process, loop_library.py)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "loop_timing.h"

#define CHECK_CUBLAS(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
  std::fprintf(stderr, "cuBLAS error %s at %s:%d\n", cublasGetStatusName(s_), __FILE__, __LINE__); std::exit(1); } } while (0)

static const size_t WORKSPACE_BYTES = size_t(32) << 20;  // cuBLAS's own default on Hopper, given explicitly so
                                                         // that graph capture allocates nothing

enum class Drawn { normal, uniform, zeros };

// Inputs as the harness draws them (INPUTS above): floats standard normal or uniform [0, 1), int8
// integers in [-64, 64), or zeros.
template <typename T>
__global__ void fill(T* p, size_t n, unsigned seed, Drawn kind) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  if (kind == Drawn::zeros) p[i] = T(0.0f);
  else if constexpr (std::is_same_v<T, int8_t>)
    p[i] = int8_t(floorf(loop_timing::uniform_at(i, seed) * loop_timing::INT8_RANGE));
  else if (kind == Drawn::uniform) p[i] = T((loop_timing::uniform_at(i, seed) + 1.0f) * 0.5f);
  else p[i] = T(loop_timing::normal_at(i, seed));
}

template <typename T>
static void fill_random(void* p, size_t n, unsigned seed, Drawn kind) {
  unsigned blocks = unsigned((n + 255) / 256);
  fill<T><<<blocks, 256>>>(static_cast<T*>(p), n, seed, kind);
  CHECK_CUDA(cudaGetLastError());
}

// INPUTS as this problem's operands are drawn (false: not a known name).
static bool drawn_of(const std::string& inputs, size_t ab_bytes, Drawn& kind) {
  if (inputs == "normal") kind = Drawn::normal;
  else if (inputs == "uniform") kind = Drawn::uniform;
  else if (inputs == "zeros") kind = Drawn::zeros;
  else if (inputs == "deepbench") kind = ab_bytes < 4 ? Drawn::zeros : Drawn::uniform;
  else return false;
  return true;
}

struct Types {
  cudaDataType_t ab, c;
  cublasComputeType_t compute;
  size_t ab_bytes, c_bytes;
};

static bool types_of(const std::string& prec, Types& t) {
  if (prec == "fp32") t = {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4};
  else if (prec == "tf32") t = {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4};
  else if (prec == "fp16") t = {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2};
  else if (prec == "fp16acc16") t = {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F, 2, 2};
  else if (prec == "bf16") t = {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};
  else if (prec == "int8") t = {CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, 1, 4};
  else return false;
  return true;
}

// Device memory of one problem, freed however the problem ends.
struct Buffers {
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ~Buffers() { cudaFree(a); cudaFree(b); cudaFree(c); }
};

// Time one problem; returns the reason on failure ("" when it printed its figures).
static std::string run_problem(cublasHandle_t handle, loop_timing::Timer& timer, const std::string& prec,
                               const std::string& ta, const std::string& tb, long m, long n, long k, double min_ms,
                               const std::string& math, double rest_s, const std::string& inputs, unsigned& seed,
                               loop_timing::Times& times) {
  Types t;
  if (!types_of(prec, t)) return "unknown precision (fp32|tf32|fp16|fp16acc16|bf16|int8)";
  Drawn kind;
  if (!drawn_of(inputs, t.ab_bytes, kind)) return "INPUTS is normal, uniform, zeros or deepbench";
  if ((ta != "N" && ta != "T") || (tb != "N" && tb != "T")) return "TRANSA and TRANSB are N or T";
  if (m <= 0 || n <= 0 || k <= 0) return "M, N and K must be positive";
  if (math != "strict" && math != "default") return "MATH is strict or default";
  const bool strict = math == "strict" && (t.ab == CUDA_R_16F || t.ab == CUDA_R_16BF);
  CHECK_CUBLAS(cublasSetMathMode(handle, strict ? cublasMath_t(CUBLAS_DEFAULT_MATH |
                                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                                              : CUBLAS_DEFAULT_MATH));
  const cublasOperation_t opa = ta == "T" ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = tb == "T" ? CUBLAS_OP_T : CUBLAS_OP_N;
  const long lda = opa == CUBLAS_OP_T ? k : m, ldb = opb == CUBLAS_OP_T ? n : k, ldc = m;
  Buffers buf;
  for (auto [p, bytes] : {std::pair{&buf.a, size_t(m) * k * t.ab_bytes}, std::pair{&buf.b, size_t(k) * n * t.ab_bytes},
                          std::pair{&buf.c, size_t(m) * n * t.c_bytes}}) {
    const cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) return std::string("cudaMalloc: ") + cudaGetErrorString(e);
  }
  const size_t na = size_t(m) * k, nb = size_t(k) * n;
  switch (t.ab) {
    case CUDA_R_32F: fill_random<float>(buf.a, na, seed++, kind); fill_random<float>(buf.b, nb, seed++, kind); break;
    case CUDA_R_16F: fill_random<__half>(buf.a, na, seed++, kind); fill_random<__half>(buf.b, nb, seed++, kind); break;
    case CUDA_R_16BF:
      fill_random<__nv_bfloat16>(buf.a, na, seed++, kind);
      fill_random<__nv_bfloat16>(buf.b, nb, seed++, kind);
      break;
    default: fill_random<int8_t>(buf.a, na, seed++, kind); fill_random<int8_t>(buf.b, nb, seed++, kind); break;
  }
  CHECK_CUDA(cudaDeviceSynchronize());  // the fills ran on the default stream, the calls run on the timer's
  if (rest_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(rest_s));
  // alpha = 1, beta = 0 in the compute type's scalar (int32 for CUBLAS_COMPUTE_32I, half for 16F).
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const int32_t alpha_i = 1, beta_i = 0;
  const __half alpha_h = __float2half(1.0f), beta_h = __float2half(0.0f);
  const void* alpha = &alpha_f;
  const void* beta = &beta_f;
  if (t.compute == CUBLAS_COMPUTE_32I) alpha = &alpha_i, beta = &beta_i;
  if (t.compute == CUBLAS_COMPUTE_16F) alpha = &alpha_h, beta = &beta_h;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  auto call = [&]() {
    status = cublasGemmEx(handle, opa, opb, int(m), int(n), int(k), alpha, buf.a, t.ab, int(lda), buf.b, t.ab,
                          int(ldb), beta, buf.c, t.c, int(ldc), t.compute, CUBLAS_GEMM_DEFAULT);
    return status == CUBLAS_STATUS_SUCCESS;
  };
  if (!timer.time_calls(call, min_ms, times)) {
    return status != CUBLAS_STATUS_SUCCESS ? std::string("cublasGemmEx: ") + cublasGetStatusName(status)
                                           : "the calls failed";
  }
  return "";
}

// The loop over stdin's lines; `min_time_ms`: how long a problem without a SECONDS field runs each way.
static int run_stdin(double min_time_ms) {
  std::cin.clear();  // a library call after an earlier one: stdin may be a new file (its EOF is not ours)
  std::clearerr(stdin);
  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  int major, minor, patch;
  CHECK_CUBLAS(cublasGetProperty(MAJOR_VERSION, &major));
  CHECK_CUBLAS(cublasGetProperty(MINOR_VERSION, &minor));
  CHECK_CUBLAS(cublasGetProperty(PATCH_LEVEL, &patch));
  std::fprintf(stderr, "# cublas %d.%d.%d\n", major, minor, patch);
  loop_timing::Timer timer;
  CHECK_CUBLAS(cublasSetStream(handle, timer.stream));
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, WORKSPACE_BYTES));
  CHECK_CUBLAS(cublasSetWorkspace(handle, workspace, WORKSPACE_BYTES));  // after SetStream, which resets it
  std::string line;
  unsigned seed = 1;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string prec, ta, tb;
    long m, n, k;
    if (!(in >> prec >> ta >> tb >> m >> n >> k)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) std::printf("%s error malformed line\n", line.c_str());
      std::fflush(stdout);
      continue;
    }
    double seconds;
    const double min_ms = (in >> seconds) ? 1000.0 * seconds : min_time_ms;
    std::string math = "strict", inputs = "normal";
    double rest_s = 0.0;
    in >> math >> rest_s >> inputs;
    loop_timing::Times times;
    const std::string error =
        run_problem(handle, timer, prec, ta, tb, m, n, k, min_ms, math, rest_s, inputs, seed, times);
    if (error.empty())
      std::printf("%s %s %s %ld %ld %ld %.4f %d %.4f %.0f %.0f\n", prec.c_str(), ta.c_str(), tb.c_str(), m, n, k,
                  times.stream_us, times.calls, times.graph_us, times.stream_mhz, times.graph_mhz);
    else
      std::printf("%s %s %s %ld %ld %ld error %s\n", prec.c_str(), ta.c_str(), tb.c_str(), m, n, k, error.c_str());
    std::fflush(stdout);
  }
  CHECK_CUBLAS(cublasDestroy(handle));
  CHECK_CUDA(cudaFree(workspace));
  return 0;
}

#ifdef GEMM_LOOP_LIBRARY
// The same loop inside another process (loop_library.py; interleaved.py); every line gives its SECONDS.
extern "C" int gemm_loop_run_stdin() { return run_stdin(0.0); }
#else
int main(int argc, char** argv) { return run_stdin(argc > 1 ? 1000.0 * std::atof(argv[1]) : 0.0); }
#endif
