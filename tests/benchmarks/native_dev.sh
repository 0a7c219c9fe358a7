#!/usr/bin/env bash
# Issue 20's GPU session on a lent H100 (no registry): carries the NVIDIA bindings as wheels in .whl/
# (nvmath-python, nvidia-cudnn-frontend; pydantic), installs the harness, then one phase:
#   bash tests/benchmarks/native_dev.sh tests         # the native backends' GPU tests (tests/test_gpu_native.py)
set -uo pipefail
PHASE=${1:-tests}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 -c "import nvmath, cudnn, torch; print('nvmath', nvmath.__version__, 'cudnn-frontend', cudnn.__version__, 'cudnn', cudnn.backend_version(), 'torch', torch.__version__)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
if [ "$PHASE" = tests ]; then
  timeout 480 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_native.py --tb=short -rfE 2>&1 | tee "$OUT/gpu_native_tests.log" | tail -80
fi
