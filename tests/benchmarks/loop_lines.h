// What the convolution loops (conv_loop.cpp, conv_find.cpp) share besides their timing (loop_timing.h): a
// problem a line on stdin, its first fields echoed at the start of every output line (the caller finds its
// problem's lines by them), a line that cannot run answered `FIELDS error WHY` while the next one runs, and the
// device memory of one problem freed however the problem ends.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace loop_lines {

// The first `fields` fields of `line` as given (not as parsed), one space apart.
inline std::string echoed(const std::string& line, int fields) {
  std::istringstream tokens(line);
  std::string out, token;
  for (int i = 0; i < fields && tokens >> token; ++i) out += (i ? " " : "") + token;
  return out;
}

// Each non-blank line of stdin handed to `run`, which prints the line's output and returns "" or why its problem
// could not run (printed as `FIELDS error WHY`); an exception (the frontend throws on some misuse, a host copy may
// not fit) fails that line alone.
template <typename Run>
void each_line(int fields, Run run) {
  for (std::string line; std::getline(std::cin, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string error;
    try {
      error = run(line);
    } catch (const std::exception& e) {
      error = std::string("exception: ") + e.what();
    }
    if (!error.empty()) std::printf("%s error %s\n", echoed(line, fields).c_str(), error.c_str());
    std::fflush(stdout);
  }
}

// Device memory of one problem, freed however the problem ends.
struct DeviceMemory {
  std::vector<void*> blocks;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    for (void* p : blocks) cudaFree(p);
  }
  // "" or why `bytes` could not be allocated (the error is cleared: the next problem runs).
  std::string alloc(void** p, size_t bytes) {
    const cudaError_t e = cudaMalloc(p, std::max<size_t>(bytes, 1));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes: " + cudaGetErrorString(e);
    }
    blocks.push_back(*p);
    return "";
  }
};

}  // namespace loop_lines
