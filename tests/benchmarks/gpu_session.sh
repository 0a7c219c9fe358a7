#!/usr/bin/env bash
# What issue 3's GPU figures were made with, on a lent H100/H200 machine (no registry, no Docker):
#   bash tests/benchmarks/gpu_session.sh check   # GPU tests, cuBLAS layout log, a quick fidelity look
#   bash tests/benchmarks/gpu_session.sh suites  # train and inference-server -> runner/published/
#   bash tests/benchmarks/gpu_session.sh fidelity  # graph gap probe and the fidelity benchmark
# pydantic is not installed there: its wheels travel in .whl/ (see README, "NVIDIA GPUs").
# Logs and a tarball of the results folders go to $OUT (or ./gpu-out).
set -uo pipefail
PHASE=${1:-check}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/device.txt"
DEV=$(python3 -c "import torch;print(torch.cuda.get_device_name().split()[1].lower())")
if [ "$PHASE" = check ]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_timing_gpu_logic.py 2>&1 | tail -30 | tee "$OUT/gpu_tests.log"
  python3 tests/benchmarks/cublas_layout.py 2>&1 | tail -40 | tee "$OUT/cublas_layout.log"
  python3 tests/benchmarks/fidelity.py --limit 8 --out "$OUT/fidelity_quick.json" 2>&1 | tee "$OUT/fidelity_quick.log"
  for s in train inference-server; do
    t0=$SECONDS; deepbench-run --local --platform nvidia --suite $s --limit 4 --quiet --out /tmp/quick-$s 2>&1 | tail -15
    echo "$s: $((SECONDS - t0)) s wall"
  done | tee "$OUT/suites_quick.log"
  tar -C /tmp -czf "$OUT/quick.tgz" quick-train quick-inference-server
elif [ "$PHASE" = suites ]; then
  for s in train inference-server; do
    cmd="deepbench-run --local --platform nvidia --suite $s --quiet --out runner/published/nvidia-$DEV/$s"
    echo "\$ $cmd"; t0=$SECONDS; timeout 560 $cmd 2>&1 | tail -25; echo "$s: $((SECONDS - t0)) s wall"
  done | tee "$OUT/suites.log"
  tar -czf "$OUT/published.tgz" runner/published
else
  python3 tests/benchmarks/graph_gap.py 2>&1 | tee "$OUT/graph_gap.log"
  python3 tests/benchmarks/fidelity.py --out "$OUT/fidelity.json" 2>&1 | tee "$OUT/fidelity.log"
fi
