#!/usr/bin/env bash
# Builds the native loops the side-by-side runs (native_side_by_side.py): gemm_loop (cuBLAS) and
# conv_loop (cuDNN through cudnn-frontend's C++ graph API), into build/native/ (or $BUILD_DIR);
# both also as libraries (libgemm_loop.so, libconv_loop.so), to time them inside another process (loop_library.py:
# interleaved.py).
#
#   bash tests/benchmarks/build_native.sh                  # on the GPU machine: the installed wheels
#   bash tests/benchmarks/build_native.sh --download DIR   # where a registry is reachable: fetch them first
#
# Both loops link the very libraries the harness loads, found through Python (python3, or $PYTHON):
#   libcublas   the nvidia pip package PyTorch loads (nvidia/cu13/lib), else the CUDA toolkit's;
#   libcudnn    the nvidia-cudnn-cu13 package (nvidia/cudnn/lib), with its cudnn.h;
#   headers     cudnn-frontend's C++ headers, which the nvidia-cudnn-frontend wheel installs at
#               site-packages/include/ (header-only: no library of its own);
#   nvrtc.h     the toolkit's (cudnn-frontend includes it), else the nvidia-cuda-nvrtc package's;
#   cuBLASLt    beside that libcublas, linked into conv_loop too (below).
# Each is linked with an rpath to its folder, so no LD_LIBRARY_PATH is needed; the loops print the
# version they loaded on stderr, and the side-by-side compares it with the results'.
# conv_find (conv_find.cpp: cuDNN's legacy cudnnFind over every algorithm, for conv_vs_find.py) needs cudnn.h,
# libcudnn and cuBLASLt (no cudnn-frontend).
# Overrides: NVCC, CUDA_HOME, ARCH (default sm_90), BUILD_DIR; LOOPS: which loops (default "gemm conv find";
# LOOPS=gemm builds gemm_loop alone, LOOPS=find conv_find alone: seconds, where conv_loop's compile takes most
# of a minute of a lent GPU's time).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/native}
ARCH=${ARCH:-sm_90}
PYTHON=${PYTHON:-python3}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")}
FRONTEND_VERSION=1.32.0  # the nvidia-cudnn-frontend the harness's cuDNN backend was written against

SEARCH_PATH=""
if [ "${1:-}" = --download ]; then
  DL=${2:?usage: build_native.sh --download DIR}
  mkdir -p "$DL/site"
  "$PYTHON" -m pip download -q --no-deps -d "$DL" "nvidia-cudnn-frontend==$FRONTEND_VERSION" nvidia-cudnn-cu13 \
    "nvidia-cublas>=13,<14" "nvidia-cuda-nvrtc>=13,<14"
  for whl in "$DL"/*.whl; do
    unzip -q -o "$whl" -d "$DL/site"  # a wheel is a zip of the site-packages tree it installs
  done
  SEARCH_PATH="$DL/site"
elif [ $# -gt 0 ]; then
  echo "usage: build_native.sh [--download DIR]" >&2
  exit 2
fi

# Print shell assignments for the folders each library lives in ("" where not found).
locate() {
  SEARCH_PATH="$SEARCH_PATH" CUDA_HOME="$CUDA_HOME" FRONTEND_VERSION="$FRONTEND_VERSION" "$PYTHON" - <<'EOF'
import glob, importlib.metadata, os, shlex, sys

extra = os.environ["SEARCH_PATH"]
roots = ([extra] if extra else []) + [p for p in sys.path if os.path.isdir(p)]
cuda = os.environ["CUDA_HOME"]


def first(patterns):
    """The first existing file matching one of the patterns, under the roots in order."""
    for root in roots:
        for pattern in patterns:
            hits = sorted(glob.glob(os.path.join(root, pattern)))
            if hits:
                return hits[-1]
    return ""


def toolkit(pattern):
    hits = sorted(glob.glob(os.path.join(cuda, pattern)))
    return hits[-1] if hits else ""


def frontend_header():
    """cudnn_frontend.h as the nvidia-cudnn-frontend distribution lists it (its include/ lands at
    the site-packages root, a folder any package could write to)."""
    for dist in importlib.metadata.distributions(path=roots):
        if (dist.metadata["Name"] or "").lower() == "nvidia-cudnn-frontend":
            if dist.version != os.environ["FRONTEND_VERSION"]:
                print(f"build_native: nvidia-cudnn-frontend {dist.version} here, the harness was written against "
                      f"{os.environ['FRONTEND_VERSION']}", file=sys.stderr)
            header = next((f for f in dist.files or () if str(f) == "include/cudnn_frontend.h"), None)
            return str(dist.locate_file(header)) if header else ""
    return ""


found = {
    "FRONTEND_H": frontend_header(),
    "CUDNN_H": first(["nvidia/cudnn/include/cudnn.h"]),
    "CUDNN_SO": first(["nvidia/cudnn/lib/libcudnn.so.9"]),
    # PyTorch's cuBLAS (cu13 wheels: nvidia/cu13/lib; cu12: nvidia/cublas/lib), which nvmath-python
    # also gets, since it loads libcublas by soname after torch did.
    "CUBLAS_SO": first(["nvidia/cu13/lib/libcublas.so.13", "nvidia/cublas/lib/libcublas.so.1*"])
                 or toolkit("lib64/libcublas.so.1*"),
    "CUBLAS_H": first(["nvidia/cu13/include/cublas_v2.h", "nvidia/cublas/include/cublas_v2.h"])
                or toolkit("include/cublas_v2.h"),
    "NVRTC_H": toolkit("include/nvrtc.h") or first(["nvidia/cu13/include/nvrtc.h", "nvidia/cuda_nvrtc/include/nvrtc.h"]),
    "NVRTC_SO": toolkit("lib64/libnvrtc.so.1*") or first(["nvidia/cu13/lib/libnvrtc.so.1*",
                                                          "nvidia/cuda_nvrtc/lib/libnvrtc.so.1*"]),
}
for name, path in found.items():
    print(f"{name}={shlex.quote(path)}")
EOF
}
eval "$(locate)"

LOOPS=${LOOPS:-gemm conv find}
wants() { [[ " $LOOPS " == *" $1 "* ]]; }  # whether LOOPS names this loop
needed=()
needed+=("CUBLAS_SO:nvidia-cublas (or the CUDA toolkit)")  # the convolution loops link cuBLASLt beside it
wants gemm && needed+=("CUBLAS_H:nvidia-cublas (or the CUDA toolkit)")
wants conv && needed+=("FRONTEND_H:nvidia-cudnn-frontend==$FRONTEND_VERSION" \
                       "NVRTC_H:the CUDA toolkit or nvidia-cuda-nvrtc" "NVRTC_SO:the CUDA toolkit or nvidia-cuda-nvrtc")
wants conv || wants find && needed+=("CUDNN_H:nvidia-cudnn-cu13" "CUDNN_SO:nvidia-cudnn-cu13")
missing=0
for pair in "${needed[@]}"; do
  var=${pair%%:*}
  if [ -z "${!var}" ]; then
    echo "build_native: no ${var} found: install ${pair#*:} for $PYTHON, or run with --download DIR" >&2
    missing=1
  fi
done
[ -x "$NVCC" ] || { echo "build_native: no nvcc at $NVCC (set NVCC or CUDA_HOME)" >&2; missing=1; }
[ "$missing" = 0 ] || exit 1

# -l:FILE links the versioned library itself (pip wheels ship no unversioned .so symlink).
lib() { echo "-L$(dirname "$1") -l:$(basename "$1") -Xlinker -rpath=$(dirname "$1")"; }
CUBLAS_FLAGS="$(lib "$CUBLAS_SO") -ldl"  # -ldl: loop_timing.h loads NVML at run time (glibc < 2.34 keeps dlopen there)
mkdir -p "$BUILD_DIR"
# The builds at once: each cudnn-frontend compile takes most of a minute, and a lent GPU's minutes count.
set -x
pids=()
if wants gemm; then
  "$NVCC" -O2 -std=c++17 -arch="$ARCH" "$HERE/gemm_loop.cu" -I"$(dirname "$CUBLAS_H")" $CUBLAS_FLAGS -o "$BUILD_DIR/gemm_loop" &
  pids+=($!)
  # Each loop also as a library, for timing it inside a Python process (loop_library.py).
  "$NVCC" -O2 -std=c++17 -arch="$ARCH" -shared -Xcompiler -fPIC -DGEMM_LOOP_LIBRARY "$HERE/gemm_loop.cu" \
    -I"$(dirname "$CUBLAS_H")" $CUBLAS_FLAGS -o "$BUILD_DIR/libgemm_loop.so" &
  pids+=($!)
fi
# The convolution loops load cuBLASLt up front (--no-as-needed), as the harness's process has it from PyTorch:
# cuDNN offers its engines that need cuBLASLt (behavior note CUBLASLT_DEPENDENCY) only where it can load it.
CUBLASLT_SO=$(ls "$(dirname "$CUBLAS_SO")"/libcublasLt.so.* | head -1)
if wants find; then
  "$NVCC" -O2 -std=c++17 -arch="$ARCH" "$HERE/conv_find.cpp" -I"$(dirname "$CUDNN_H")" -ldl $(lib "$CUDNN_SO") \
    -Xlinker --no-as-needed $(lib "$CUBLASLT_SO") -o "$BUILD_DIR/conv_find" &
  pids+=($!)
fi
if wants conv; then
  CONV_FLAGS="-ldl $(lib "$CUDNN_SO") $(lib "$NVRTC_SO") -Xlinker --no-as-needed $(lib "$CUBLASLT_SO")"
  "$NVCC" -O2 -std=c++17 -arch="$ARCH" "$HERE/conv_loop.cpp" -I"$(dirname "$FRONTEND_H")" -I"$(dirname "$CUDNN_H")" \
    -I"$(dirname "$NVRTC_H")" $CONV_FLAGS -o "$BUILD_DIR/conv_loop" &
  pids+=($!)
  "$NVCC" -O2 -std=c++17 -arch="$ARCH" -shared -Xcompiler -fPIC -DCONV_LOOP_LIBRARY "$HERE/conv_loop.cpp" \
    -I"$(dirname "$FRONTEND_H")" -I"$(dirname "$CUDNN_H")" -I"$(dirname "$NVRTC_H")" $CONV_FLAGS -o "$BUILD_DIR/libconv_loop.so" &
  pids+=($!)
fi
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done  # every build's errors shown, then one status
exit $failed
