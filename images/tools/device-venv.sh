#!/usr/bin/env bash
# Make .venv-device: the ARM image's Python environment on any host (x86 included), for running
# the tflite and onnxruntime backends with --local and for their tests. It exists because
# tflite-runtime 2.14 is compiled against numpy 1.x and cannot load beside numpy 2 (the main
# environment's, which PyTorch's tests use), so it gets its own numpy < 2, as in the image.
#
#   images/tools/device-venv.sh [VENV] [-- PIP_ARGS...]   # default VENV: <repo>/.venv-device
#   VENV/bin/deepbench-run --local --suite inference-device --backend tflite
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${1:-$REPO/.venv-device}"
[ "${1:-}" = "--" ] && VENV="$REPO/.venv-device"
shift || true
[ "${1:-}" = "--" ] && shift
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" -e "$REPO[tflite,onnxruntime,test]"
"$VENV/bin/python" -c "import numpy, tflite_runtime, onnxruntime; print('device venv:', '$VENV', 'numpy', numpy.__version__, 'tflite-runtime', tflite_runtime.__version__, 'onnxruntime', onnxruntime.__version__)"
