#!/usr/bin/env bash
# Issue 44's GPU evidence in one call of a lent machine with several GPUs: one job per GPU, all at
# once, each on its GPU alone (CUDA_VISIBLE_DEVICES), so that two GPUs of one kind run the same
# command in the same sitting. A job is GPU:PRECISION:INPUTS:LOOP:
#   deepbench-run --local --platform nvidia --suite train --ops gemm --precision PRECISION
#                 --inputs INPUTS --energy --energy-window $WINDOW
#   then energy_vs_power.py on it (the counter against the integral of the sampled power),
#   then, with LOOP=loop, the native gemm_loop beside it (native_side_by_side.py, parts of 20 us and
#   more; each problem drawn as its result records, DeepBench's own half call where INPUTS=deepbench).
#
#   JOBS="0:fp16:deepbench:loop 1:fp16:normal:loop 2:fp32:normal:none 3:fp16:normal:loop" \
#     OUT=$OUT bash tests/benchmarks/energy_gpus.sh
#
# Environment: JOBS (above), WINDOW (energy window per part, default 1 s; ENERGY=0: no --energy, the runs
# time only), SKIP_INSTALL=1 (the caller installed the wheels and the package, PYTHONPATH set), RUN_S (each run's limit,
# default 390 s: a run stopped there keeps what it measured), LOOP_S (each side-by-side's, default 120 s;
# each problem at most LOOP_MAX s each way, default 0.25, after 5 s of warm-up: the GPU has just run the suite).
# $OUT gets summary.log (every job's log) and results.tgz (the run folders with their energy_vs_power
# and side-by-side logs and JSON, the install and build logs): a lent machine returns 8 files at most.
set -uo pipefail
JOBS=${JOBS:-"0:fp16:deepbench:loop 1:fp16:normal:loop"}
WINDOW=${WINDOW:-1}
RUN_S=${RUN_S:-390}
LOOP_S=${LOOP_S:-120}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d)  # a fresh folder: nothing of the caller's is removed or overwritten
RUNS=$WORK/runs; mkdir -p "$RUNS"
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  OUT=$RUNS bash "$HERE/gpu_session.sh" install >"$RUNS/gpu-session.log" 2>&1 || { cat "$RUNS/gpu-session.log"; exit 1; }
  [ -d /tmp/site ] && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv \
  | tee "$RUNS/device.txt"
case "$JOBS" in *:loop*) LOOPS=gemm bash "$HERE/build_native.sh" >"$RUNS/build.log" 2>&1 || tail -5 "$RUNS/build.log";; esac

job() {  # GPU PRECISION INPUTS LOOP
  local gpu=$1 precision=$2 inputs=$3 loop=$4
  local dir="$RUNS/train-gemm-$precision-$inputs-gpu$gpu"
  local cmd="deepbench-run --local --platform nvidia --suite train --ops gemm --precision $precision --inputs $inputs"
  [ "${ENERGY:-1}" = 1 ] && cmd+=" --energy --energy-window $WINDOW"
  cmd+=" --quiet --out $dir"
  export CUDA_VISIBLE_DEVICES=$gpu
  echo "\$ CUDA_VISIBLE_DEVICES=$gpu $cmd"
  local t0=$SECONDS
  timeout "$RUN_S" $cmd 2>&1 | tail -6
  echo "run: $((SECONDS - t0)) s wall"
  if [ "${ENERGY:-1}" = 1 ]; then
    python3 "$HERE/energy_vs_power.py" "$dir" >"$dir/energy-vs-power.log" 2>&1
    tail -1 "$dir/energy-vs-power.log"
  fi
  if [ "$loop" = loop ]; then
    local extra=(); [ "$inputs" = deepbench ] && extra=(--deepbench-call)
    local side=(--min-us 20 --max-seconds "${LOOP_MAX:-0.25}" --warm-up 5 "${extra[@]}")
    echo "\$ python3 tests/benchmarks/native_side_by_side.py $dir ${side[*]}"
    timeout "$LOOP_S" python3 "$HERE/native_side_by_side.py" "$dir" "${side[@]}" \
      --json "$dir/side-by-side.json" >"$dir/side-by-side.log" 2>&1
    grep -E "^(SUMMARY|CLOCKS)" "$dir/side-by-side.log" || tail -3 "$dir/side-by-side.log"
  fi
}

for spec in $JOBS; do
  IFS=: read -r gpu precision inputs loop <<<"$spec"
  job "$gpu" "$precision" "$inputs" "$loop" >"$RUNS/job-gpu$gpu.log" 2>&1 &
done
wait
for spec in $JOBS; do echo "== ${spec}"; cat "$RUNS/job-gpu${spec%%:*}.log"; done | tee "$OUT/summary.log"
tar -C "$WORK" -czf "$OUT/results.tgz" runs
