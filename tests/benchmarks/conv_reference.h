// The float64 definition conv_find.cpp checks every algorithm against, host code alone (no CUDA, no cuDNN), so
// that a CPU test compiles it with a plain C++ compiler and holds it to PyTorch's convolution
// (tests/test_conv_find_reference.py): the storage layouts cuDNN reads (NCHW, NHWC, NCHW_VECT_C with 32 channels a
// vector; filters likewise: KCRS, KRSC, K C/32 R S 32) and each direction's output element from its two inputs
// (cross-correlation, dilation 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conv_reference {

const int VECT = 32;  // NCHW_VECT_C with INT8x32: channels per vector

enum class Layout { NCHW, NHWC, VECT_C };

inline const char* layout_name(Layout l) {
  return l == Layout::NCHW ? "nchw" : l == Layout::NHWC ? "nhwc" : "nchw_vect_c";
}

// One convolution direction's sizes as handed to cuDNN (padded), and the direction.
struct Conv {
  std::string direction;  // fwd | bwd_data | bwd_filter
  int64_t n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w;
};

// A 4-d tensor's logical sizes (N, C, H, W; a filter's K, C, R, S) and its storage layout.
struct Shape {
  int64_t d[4];
  Layout layout;
  size_t elements() const { return size_t(d[0]) * d[1] * d[2] * d[3]; }
  // The storage index of logical element (a, b, y, x).
  size_t at(int64_t a, int64_t b, int64_t y, int64_t x) const {
    const int64_t C = d[1], H = d[2], W = d[3];
    switch (layout) {
      case Layout::NCHW: return size_t(((a * C + b) * H + y) * W + x);
      case Layout::NHWC: return size_t(((a * H + y) * W + x) * C + b);
      default: return size_t((((a * (C / VECT) + b / VECT) * H + y) * W + x) * VECT + b % VECT);
    }
  }
};

// The float64 value of the direction's output element `o` (logical indices) from the host inputs.
inline double value(const Conv& p, const Shape& xs, const Shape& ws, const Shape& ys, const std::vector<float>& a,
                    const std::vector<float>& b, const int64_t o[4]) {
  double sum = 0.0;
  const int64_t P = ys.d[2], Q = ys.d[3];
  if (p.direction == "fwd") {  // a = x, b = w; o = (n, k, p, q)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t r = 0; r < p.r; ++r) {
        const int64_t ih = o[2] * p.stride_h - p.pad_h + r;
        if (ih < 0 || ih >= p.h) continue;
        for (int64_t s = 0; s < p.s; ++s) {
          const int64_t iw = o[3] * p.stride_w - p.pad_w + s;
          if (iw < 0 || iw >= p.w) continue;
          sum += double(a[xs.at(o[0], c, ih, iw)]) * double(b[ws.at(o[1], c, r, s)]);
        }
      }
  } else if (p.direction == "bwd_data") {  // a = dy, b = w; o = (n, c, h, w)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t r = 0; r < p.r; ++r) {
        const int64_t th = o[2] + p.pad_h - r;
        if (th < 0 || th % p.stride_h || th / p.stride_h >= P) continue;
        for (int64_t s = 0; s < p.s; ++s) {
          const int64_t tw = o[3] + p.pad_w - s;
          if (tw < 0 || tw % p.stride_w || tw / p.stride_w >= Q) continue;
          sum += double(a[ys.at(o[0], k, th / p.stride_h, tw / p.stride_w)]) * double(b[ws.at(k, o[1], r, s)]);
        }
      }
  } else {  // a = x, b = dy; o = (k, c, r, s)
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t oh = 0; oh < P; ++oh) {
        const int64_t ih = oh * p.stride_h - p.pad_h + o[2];
        if (ih < 0 || ih >= p.h) continue;
        for (int64_t ow = 0; ow < Q; ++ow) {
          const int64_t iw = ow * p.stride_w - p.pad_w + o[3];
          if (iw < 0 || iw >= p.w) continue;
          sum += double(a[xs.at(n, o[1], ih, iw)]) * double(b[ys.at(n, o[0], oh, ow)]);
        }
      }
  }
  return sum;
}

}  // namespace conv_reference
