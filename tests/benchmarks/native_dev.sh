#!/usr/bin/env bash
# Issue 20's GPU sessions on a lent H100 (no registry, no Docker): carries NVIDIA's bindings as wheels in
# .whl/ (nvmath-python, nvidia-cudnn-frontend; pydantic), installs the harness, then one phase:
#   bash tests/benchmarks/native_dev.sh tests        # the native backends' GPU tests (tests/test_gpu_native.py)
#   bash tests/benchmarks/native_dev.sh server       # inference-server with the new defaults -> runner/published,
#                                                    # then the native side-by-side of its GEMMs (and convs, time allowing)
#   bash tests/benchmarks/native_dev.sh train-gemm   # train's GEMMs and their native side-by-side, one sitting
#   bash tests/benchmarks/native_dev.sh verify       # every GPU test; train's fp16 GEMMs beside native loops
#   bash tests/benchmarks/native_dev.sh train        # the train suite -> runner/published/nvidia-h100/train
# Source it (`. native_dev.sh probe`) to keep its environment for more commands.
set -uo pipefail
PHASE=${1:-tests}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 -c "import nvmath, cudnn, torch; print('nvmath', nvmath.__version__, 'cudnn-frontend', cudnn.__version__, 'cudnn', cudnn.backend_version(), 'torch', torch.__version__)"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/device.txt"
SBS="python3 tests/benchmarks/native_side_by_side.py --min-us 20 --max-seconds 0.2 --candidate-seconds 0.02"
build() { bash tests/benchmarks/build_native.sh >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }; }
suite() {  # suite, seconds at most, extra deepbench-run arguments: -> runner/published/nvidia-h100/<suite>
  local dir=runner/published/nvidia-h100/$1 cmd
  cmd="deepbench-run --local --platform nvidia --suite $1 --quiet --out $dir ${*:3}"
  rm -rf "$dir"; echo "\$ $cmd" | tee "$OUT/suite-$1.log"
  local t0=$SECONDS; timeout "$2" $cmd >>"$OUT/suite-$1.log" 2>&1; echo "$1: $((SECONDS - t0)) s wall" | tee -a "$OUT/suite-$1.log"
  tail -3 "$OUT/suite-$1.log"; tar -czf "$OUT/suite-$1.tgz" "$dir"
}
case "$PHASE" in
tests) timeout 480 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_native.py --tb=short -rfE 2>&1 \
         | tee "$OUT/gpu_native_tests.log" | tail -40 ;;
server)
  build
  suite inference-server 420
  timeout 100 $SBS runner/published/nvidia-h100/inference-server --only 'gemm/*' --warm-up 5 \
    --json "$OUT/sbs-server-gemm.json" >"$OUT/sbs-server-gemm.log" 2>&1; grep SUMMARY "$OUT/sbs-server-gemm.log" ;;
train-gemm)
  build
  dir=runs/train-gemm; cmd="deepbench-run --local --platform nvidia --suite train --ops gemm --quiet --out $dir"
  t0=$SECONDS; timeout 300 $cmd >"$OUT/train-gemm.log" 2>&1; echo "train gemm: $((SECONDS - t0)) s"; tail -2 "$OUT/train-gemm.log"
  tar -czf "$OUT/train-gemm.tgz" "$dir"
  timeout 200 $SBS "$dir" --warm-up 0 --json "$OUT/sbs-train-gemm.json" >"$OUT/sbs-train-gemm.log" 2>&1
  grep SUMMARY "$OUT/sbs-train-gemm.log" ;;
finish)  # one sitting: finish inference-server (--resume), then train's GEMMs and the server's int8
         # convolutions each measured here and run beside their native loops
  build
  t0=$SECONDS; timeout 60 deepbench-run --resume runner/published/nvidia-h100/inference-server --quiet \
    >>"$OUT/suite-inference-server.log" 2>&1; echo "resume: $((SECONDS - t0)) s"; tail -2 "$OUT/suite-inference-server.log"
  tar -czf "$OUT/suite-inference-server.tgz" runner/published/nvidia-h100/inference-server
  for spec in "train-gemm train gemm fp32,fp16 230" "server-conv8 inference-server conv int8 60"; do
    set -- $spec; dir=runs/$1
    t0=$SECONDS; timeout $5 deepbench-run --local --platform nvidia --suite $2 --ops $3 --precision $4 --quiet \
      --out $dir >"$OUT/$1.log" 2>&1; echo "$1: $((SECONDS - t0)) s"; tail -1 "$OUT/$1.log"
    tar -czf "$OUT/$1.tgz" "$dir"
    timeout 120 $SBS "$dir" --warm-up 0 --json "$OUT/sbs-$1.json" >"$OUT/sbs-$1.log" 2>&1; grep SUMMARY "$OUT/sbs-$1.log"
  done ;;
final)  # finish inference-server; train's fp16 GEMMs beside native loops timed as long as the harness timed them
  [ -x build/native/gemm_loop ] || build
  t0=$SECONDS; timeout 150 deepbench-run --resume runner/published/nvidia-h100/inference-server --quiet \
    >"$OUT/resume.log" 2>&1; echo "resume: $((SECONDS - t0)) s"; tail -1 "$OUT/resume.log"
  tar -czf "$OUT/server.tgz" runner/published/nvidia-h100/inference-server
  dir=runs/train-gemm-fp16; t0=$SECONDS
  timeout 150 deepbench-run --local --platform nvidia --suite train --ops gemm --precision fp16 --quiet --out $dir \
    >"$OUT/run.log" 2>&1; echo "train fp16 gemm: $((SECONDS - t0)) s"; tail -1 "$OUT/run.log"; tar -czf "$OUT/fp16.tgz" $dir
  timeout 200 python3 tests/benchmarks/native_side_by_side.py --min-us 20 $dir --warm-up 0 --json "$OUT/sbs.json" \
    >"$OUT/sbs.log" 2>&1; grep SUMMARY "$OUT/sbs.log" ;;
train)  # the train suite with the defaults -> runner/published/nvidia-h100/train, and its wall time
  suite train 570 ;;
verify)  # the GPU tests of every GPU path (timing strategies, native backends, models, NCCL), then train's
         # fp16 GEMMs beside native loops timed as long as the harness timed them
  timeout 230 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_gpu_native.py \
    tests/test_timing_gpu_logic.py tests/test_model_level.py tests/test_all_reduce.py::test_single_gpu_nccl \
    --tb=short -rfE 2>&1 | tee "$OUT/gpu_tests.log" | tail -15
  build
  dir=runs/train-gemm-fp16; t0=$SECONDS
  timeout 150 deepbench-run --local --platform nvidia --suite train --ops gemm --precision fp16 --quiet --out $dir \
    >"$OUT/run.log" 2>&1; echo "train fp16 gemm: $((SECONDS - t0)) s"; tail -1 "$OUT/run.log"; tar -czf "$OUT/fp16.tgz" $dir
  timeout 170 python3 tests/benchmarks/native_side_by_side.py --min-us 20 $dir --warm-up 0 --json "$OUT/sbs.json" \
    >"$OUT/sbs.log" 2>&1; grep SUMMARY "$OUT/sbs.log" ;;
esac
