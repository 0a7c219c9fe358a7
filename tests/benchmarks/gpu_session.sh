#!/usr/bin/env bash
# What issue 3's GPU figures were made with, on a lent H100/H200 machine (no registry, no Docker), one
# phase a call (each fits the lent machine's 10 minutes a command):
#   bash tests/benchmarks/gpu_session.sh install             # only the install (other scripts call it first)
#   bash tests/benchmarks/gpu_session.sh check               # GPU tests, cuBLAS layout log, conv fidelity
#   bash tests/benchmarks/gpu_session.sh fidelity fp16 --no-repeat    # fidelity of the training GEMMs in a precision:
#                                                                     # the profiler and the native loop (5-7 min)
#   bash tests/benchmarks/gpu_session.sh fidelity fp16 --no-profiler  # repeatability and the native loop (6 min);
#                                                                     # then fidelity.py --merge on the JSON files
#   bash tests/benchmarks/gpu_session.sh suite train         # a suite -> runner/published/nvidia-<gpu>/<suite>
#   bash tests/benchmarks/gpu_session.sh suite inference-server
#   bash tests/benchmarks/gpu_session.sh models              # model suites at batch 32, with their reports
#   bash tests/benchmarks/gpu_session.sh energy fp16         # the train GEMMs in one precision with --energy
#                                                            # (1 s windows; ~5.5-6.5 min on an H100), then
#                                                            # energy_vs_power.py: counter against power integral
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
  python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_timing_gpu_logic.py tests/test_model_level.py -k gpu 2>&1 | tail -30 | tee "$OUT/gpu_tests.log"
  python3 tests/benchmarks/cublas_layout.py 2>&1 | tail -40 | tee "$OUT/cublas_layout.log"
  python3 tests/benchmarks/fidelity.py --no-gemm --out "$OUT/fidelity-conv.json" > "$OUT/fidelity-conv.log" 2>&1; tail -4 "$OUT/fidelity-conv.log"
elif [ "$PHASE" = fidelity ]; then
  name=fidelity-${2//,/-}${3:+-${3#--}}
  python3 tests/benchmarks/fidelity.py --precisions "$2" --no-conv "${@:3}" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  tail -9 "$OUT/$name.log"
elif [ "$PHASE" = suite ]; then
  dir="runner/published/nvidia-$DEV/$2"; rm -rf "$dir"
  cmd="deepbench-run --local --platform nvidia --suite $2 --quiet --out $dir"
  { echo "\$ $cmd"; t0=$SECONDS; timeout 585 $cmd 2>&1 | tail -25; echo "$2: $((SECONDS - t0)) s wall"; } | tee "$OUT/suite-$2.log"
  tar -czf "$OUT/suite-$2.tgz" "$dir"
elif [ "$PHASE" = energy ]; then
  dir="runner/published/nvidia-$DEV/train-gemm-energy-$2"; rm -rf "$dir"
  cmd="deepbench-run --local --platform nvidia --suite train --ops gemm --precision $2 --energy --energy-window 1 --quiet --out $dir"
  { echo "\$ $cmd"; t0=$SECONDS; timeout 470 $cmd 2>&1 | tail -25; echo "energy $2: $((SECONDS - t0)) s wall"; } | tee "$OUT/energy-$2.log"
  python3 tests/benchmarks/energy_vs_power.py "$dir" > "$OUT/energy-vs-power-$2.log" 2>&1; tail -3 "$OUT/energy-vs-power-$2.log"
  python3 -c "import json,sys; f=json.load(open(sys.argv[1])); print('device facts:', f['device'].get('energy_meter'))" "$dir/facts.json"
  tar -czf "$OUT/energy-$2.tgz" "$dir"
elif [ "$PHASE" = models ]; then
  # Model suites at batch 32 (operators, layers and the whole model, issue 9), and their reports.
  for spec in "resnet50 fp32,fp16" "bert-base fp32,fp16" "vgg16 fp16" "densenet121 fp16" "lstm-lm fp16" "gpt2 fp16" \
              "llama3-8b-layer fp16"; do
    set -- $spec; dir="runner/published/nvidia-$DEV/model-$1-b32"; rm -rf "$dir"
    cmd="deepbench-run --local --platform nvidia --suite model:$1 --batch 32 --precision $2 --quiet --out $dir"
    echo "\$ $cmd"; t0=$SECONDS; timeout 300 $cmd 2>&1 | tail -4; echo "$1: $((SECONDS - t0)) s wall"
    deepbench models report "$dir" > "$dir/REPORT.txt" 2>&1
  done | tee "$OUT/models.log"
  tar -czf "$OUT/models.tgz" runner/published/nvidia-$DEV/model-*
fi
