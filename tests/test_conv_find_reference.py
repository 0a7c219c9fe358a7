"""The float64 definition conv_find checks cuDNN's algorithms against (tests/benchmarks/conv_reference.h), held to
PyTorch's convolution and its two gradients on the CPU: every output element of every direction, in each storage
layout cuDNN reads (NCHW, NHWC, NCHW_VECT_C), with strides, padding and non-square filters. A wrong index here
would pass wrong algorithms or fail right ones in conv_vs_find.py's comparison. Needs a C++17 compiler (skipped
without one); no CUDA, no cuDNN."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

HEADER_DIR = Path(__file__).resolve().parent / "benchmarks"
COMPILER = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
EXACT = 1e-12  # both sides sum the same float64 products; only the order differs

# Reads `DIRECTION LAYOUT N C H W K R S PAD_H PAD_W STRIDE_H STRIDE_W`; prints the two inputs in logical order
# (each a line), then every output element's value in logical order; inputs are pseudo-random floats.
# DIRECTION `at`: prints the storage index of every element of an N C H W tensor instead.
DRIVER = r"""
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include "conv_reference.h"
using namespace conv_reference;
static void dump(const Shape& s, const std::vector<float>& v) {
  for (int64_t a = 0; a < s.d[0]; ++a) for (int64_t b = 0; b < s.d[1]; ++b)
    for (int64_t y = 0; y < s.d[2]; ++y) for (int64_t x = 0; x < s.d[3]; ++x)
      std::printf("%.17g ", v[s.at(a, b, y, x)]);
  std::printf("\n");
}
int main() {
  Conv p; std::string layout_text;
  std::cin >> p.direction >> layout_text >> p.n >> p.c >> p.h >> p.w >> p.k >> p.r >> p.s >> p.pad_h >> p.pad_w
           >> p.stride_h >> p.stride_w;
  const Layout l = layout_text == "nchw" ? Layout::NCHW : layout_text == "nhwc" ? Layout::NHWC : Layout::VECT_C;
  if (p.direction == "at") {  // the storage index of every element of an N C H W tensor, in logical order
    const Shape xs{{p.n, p.c, p.h, p.w}, l};
    for (int64_t a = 0; a < p.n; ++a) for (int64_t b = 0; b < p.c; ++b)
      for (int64_t y = 0; y < p.h; ++y) for (int64_t x = 0; x < p.w; ++x) std::printf("%zu ", xs.at(a, b, y, x));
    return 0;
  }
  const int64_t P = (p.h + 2 * p.pad_h - p.r) / p.stride_h + 1, Q = (p.w + 2 * p.pad_w - p.s) / p.stride_w + 1;
  const Shape xs{{p.n, p.c, p.h, p.w}, l}, ws{{p.k, p.c, p.r, p.s}, l}, ys{{p.n, p.k, P, Q}, l};
  const bool fwd = p.direction == "fwd", data = p.direction == "bwd_data";
  const Shape& as = data ? ys : xs;
  const Shape& bs = fwd || data ? ws : ys;
  const Shape& os = fwd ? ys : data ? xs : ws;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::vector<float> a(as.elements()), b(bs.elements());
  for (float& v : a) v = normal(gen);
  for (float& v : b) v = normal(gen);
  dump(as, a);
  dump(bs, b);
  for (int64_t i = 0; i < os.d[0]; ++i) for (int64_t j = 0; j < os.d[1]; ++j)
    for (int64_t y = 0; y < os.d[2]; ++y) for (int64_t x = 0; x < os.d[3]; ++x) {
      const int64_t o[4] = {i, j, y, x};
      std::printf("%.17g ", value(p, xs, ws, ys, a, b, o));
    }
  std::printf("\n");
}
"""

# (h, w, r, s, pad_h, pad_w, stride_h, stride_w): square, asymmetric padding and strides, a filter wider than tall
GEOMETRIES = [(7, 9, 3, 3, 1, 1, 1, 1), (8, 7, 3, 2, 0, 1, 2, 3), (9, 10, 5, 5, 2, 2, 2, 2), (6, 11, 1, 4, 0, 2, 1, 2)]
LAYOUTS = [("nchw", 3, 5), ("nhwc", 3, 5), ("nchw_vect_c", 64, 32)]  # layout, C, K (VECT_C: multiples of 32)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    folder = tmp_path_factory.mktemp("conv_reference")
    (folder / "driver.cpp").write_text(DRIVER)
    binary = folder / "driver"
    subprocess.run(
        [
            COMPILER,
            "-std=c++17",
            "-O1",
            "-Wall",
            "-Werror",
            f"-I{HEADER_DIR}",
            str(folder / "driver.cpp"),
            "-o",
            str(binary),
        ],
        check=True,
    )
    return binary


def torch_value(direction: str, a: torch.Tensor, b: torch.Tensor, n: int, c: int, h: int, w: int, k: int, geometry):
    """The direction's output, logical order, from PyTorch in float64."""
    _, _, r, s, ph, pw, sh, sw = geometry
    p, q = (h + 2 * ph - r) // sh + 1, (w + 2 * pw - s) // sw + 1
    stride, padding = (sh, sw), (ph, pw)
    if direction == "fwd":
        return F.conv2d(a.view(n, c, h, w), b.view(k, c, r, s), stride=stride, padding=padding)
    if direction == "bwd_data":
        return torch.nn.grad.conv2d_input((n, c, h, w), b.view(k, c, r, s), a.view(n, k, p, q), stride, padding)
    return torch.nn.grad.conv2d_weight(a.view(n, c, h, w), (k, c, r, s), b.view(n, k, p, q), stride, padding)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_filter"])
@pytest.mark.parametrize(("layout", "c", "k"), LAYOUTS)
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_every_output_element_is_pytorchs(driver: Path, direction: str, layout: str, c: int, k: int, geometry) -> None:
    n = 2
    h, w, r, s, ph, pw, sh, sw = geometry
    line = f"{direction} {layout} {n} {c} {h} {w} {k} {r} {s} {ph} {pw} {sh} {sw}"
    out = subprocess.run([str(driver)], input=line, capture_output=True, text=True, check=True).stdout.splitlines()
    a, b, got = (torch.tensor([float(v) for v in row.split()], dtype=torch.float64) for row in out)
    want = torch_value(direction, a, b, n, c, h, w, k, geometry).flatten()
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=EXACT, atol=EXACT * float(want.abs().max())), (line, (got - want).abs().max())


def storage_of(layout: str, n: int, c: int, h: int, w: int) -> torch.Tensor:
    """Each logical (n, c, h, w) element's index in memory as cuDNN lays the format out (its documentation):
    NCHW, NHWC, and NCHW_VECT_C as N, C/32, H, W, 32."""
    memory = torch.arange(n * c * h * w)
    if layout == "nchw":
        return memory.view(n, c, h, w)
    if layout == "nhwc":
        return memory.view(n, h, w, c).permute(0, 3, 1, 2)
    return memory.view(n, c // 32, h, w, 32).permute(0, 1, 4, 2, 3).reshape(n, c, h, w)


@pytest.mark.parametrize(("layout", "c", "k"), LAYOUTS)
def test_storage_indices_are_cudnns_layouts(driver: Path, layout: str, c: int, k: int) -> None:
    n, h, w = 2, 3, 5
    out = subprocess.run(
        [str(driver)], input=f"at {layout} {n} {c} {h} {w} {k} 1 1 0 0 1 1", capture_output=True, text=True, check=True
    ).stdout
    assert [int(v) for v in out.split()] == storage_of(layout, n, c, h, w).flatten().tolist()
