#!/usr/bin/env bash
# Issue 56's GPU sitting on a lent H200 (no registry, no Docker, `--local`; NVIDIA's bindings carried as wheels in
# .whl/, as native_dev.sh): `train` from an empty engine cache, `train` again with the cache it filled, then
# `inference-server` from an empty cache, each beside DeepBench's binaries for the same sets
# (tests/benchmarks/suite_pace.py), and the goals checked:
#   train cold <= 300 s, train warm <= 150 s, inference-server cold <= 180 s, every kernel ok and checked;
#   the warm train against the cold one: within 3% for 95% of its kernels (cycles where clocks differ:
#   cycles_agreement.py) and the same engine family for every convolution direction (suite_pace.py --families).
#
#   bash tests/benchmarks/pace_gpu.sh          # every phase not yet done, in order, within PACE_LIMIT_S
# (the device call carries .whl, and DEEPBENCH_BIN's folder where it is given; a call that starts on a fresh
# machine starts over, one on the machine the last call left warm goes on where it stopped)
#
# The phases: binaries (DeepBench's own, timed by the shell: deepbench-binaries.tsv), train-cold, train-warm,
# server-cold, tables. A phase whose run is complete is skipped, so a second call on the same (warm) machine goes on
# where the first stopped; one that the limit would cut is left for that call (say so), and a run a phase's own
# timeout cut is finished by `deepbench-run --resume` there (its wall time then misses its goal, as it should).
# Where things live: WORK (default build/pace, kept between calls of a warm machine: build/ is git-ignored), the
# engine cache in WORK/cache-train and WORK/cache-server (--engine-cache: emptied before each cold run), the user's
# cache folder in WORK/xdg. DeepBench's binaries: DEEPBENCH_BIN names a folder of them built for this GPU (conv_bench,
# gemm_bench, rnn_bench, as its code/nvidia/Makefile builds them; carried in an ignored folder), each timed here on
# its sets; or DEEPBENCH_TIMES names a table of an earlier sitting (suite_pace.py's format: copied, and its rows say
# where they came from); with neither, the tables have no binaries' column. Back under $OUT (8 files at most):
# pace.log (every phase's lines, SUMMARY lines, the tables), deepbench-binaries.tsv, and one tarball per run.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
WORK=${WORK:-$PWD/build/pace}; mkdir -p "$WORK/xdg"
LIMIT=${PACE_LIMIT_S:-570}  # this call's seconds: a lent machine's command stops at 600
LOG=$OUT/pace.log
TIMES=$OUT/deepbench-binaries.tsv
export PYTHONUNBUFFERED=1 XDG_CACHE_HOME=$WORK/xdg
say() { echo "$*" | tee -a "$LOG"; }
# A cold sitting starts from no engine db at all: the shipped one (kernels/backends/cudnn/find_db/, filled from
# earlier sittings) is set aside on this copy of the tree, or its entries would make the cold runs warm.
mkdir -p "$WORK/shipped-db-aside"; mv kernels/backends/cudnn/find_db/*.json "$WORK/shipped-db-aside/" 2>/dev/null
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  >>"$LOG" 2>&1 || { say "wheels in .whl/ did not install"; exit 1; }
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >>"$LOG" 2>&1 || { tail -5 "$LOG"; exit 1; }
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,temperature.gpu,power.limit --format=csv,noheader \
  | tee -a "$LOG"
left() { echo $((LIMIT - SECONDS)); }
complete() { grep -qs '"state": *"complete"' "$1/run.json"; }

binaries() {  # DeepBench's binaries on their sets -> deepbench-binaries.tsv (SUITE OP PRECISION SECONDS COMMAND)
  [ -s "$TIMES" ] && { say "binaries: done before ($TIMES)"; return; }
  if [ -z "${DEEPBENCH_BIN:-}" ]; then
    if [ -n "${DEEPBENCH_TIMES:-}" ]; then cp "$DEEPBENCH_TIMES" "$TIMES"; say "binaries: from $DEEPBENCH_TIMES"
    else say "binaries: none (set DEEPBENCH_BIN or DEEPBENCH_TIMES): the tables have no binaries' column"; fi
    return
  fi
  echo "# DeepBench's binaries in $DEEPBENCH_BIN, each timed by the shell around it (pace_gpu.sh)" >"$TIMES"
  # the harness's names for each binary run's set, operation and precision (gemm_bench's half: fp16 accumulate)
  local row suite op precision binary args t0 rc ms
  for row in "train conv fp32 conv_bench train float" "train conv fp16 conv_bench train half" \
             "train gemm fp32 gemm_bench train float" "train gemm fp16 gemm_bench train half" \
             "train rnn fp32 rnn_bench train float" "train rnn fp16 rnn_bench train half" \
             "inference-server conv fp16 conv_bench inference half" "inference-server conv int8 conv_bench inference int8" \
             "inference-server gemm fp16 gemm_bench inference half" "inference-server gemm int8 gemm_bench inference int8" \
             "inference-server rnn fp32 rnn_bench inference float" "inference-server rnn fp16 rnn_bench inference half"; do
    read -r suite op precision binary args <<<"$row"
    [ -x "$DEEPBENCH_BIN/$binary" ] || { say "binaries: no $binary in $DEEPBENCH_BIN"; continue; }
    [ "$(left)" -gt 120 ] || { say "binaries: $binary $args left for the next call"; rm -f "$TIMES"; return; }
    t0=$(date +%s%N)
    timeout 300 "$DEEPBENCH_BIN/$binary" $args >"$WORK/$binary-${args// /-}.log" 2>&1; rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf '%s\t%s\t%s\t%d.%03d\t%s\n' "$suite" "$op" "$precision" $((ms / 1000)) $((ms % 1000)) \
      "$binary $args (exit $rc)" | tee -a "$TIMES" | tee -a "$LOG"
  done
}

suite_run() {  # name, suite, seconds for the run, cache folder, empty it first (cold) or not
  local name=$1 suite=$2 limit=$3 cache=$4 cold=$5 dir=$WORK/$1 t0 rc
  complete "$dir" && { say "$name: done before"; return 0; }
  if [ -d "$dir" ]; then  # cut by an earlier call's limit: finish it, its wall time counts both segments
    [ "$(left)" -gt 60 ] || { say "$name: left for the next call"; return 1; }
    t0=$SECONDS; timeout "$(( $(left) - 30 ))" deepbench-run --resume "$dir" --quiet >>"$WORK/$name.log" 2>&1
    say "$name: resumed, $((SECONDS - t0)) s"; complete "$dir"; return
  fi
  [ "$(left)" -gt $((limit / 2)) ] || { say "$name: left for the next call ($(left) s left here)"; return 1; }
  [ "$cold" = cold ] && rm -rf "$cache"
  t0=$SECONDS
  timeout "$(( $(left) - 30 < limit * 2 ? $(left) - 30 : limit * 2 ))" deepbench-run --local --platform nvidia \
    --suite "$suite" --engine-cache "$cache" --quiet --out "$dir" >"$WORK/$name.log" 2>&1; rc=$?
  say "$name: $((SECONDS - t0)) s wall (exit $rc; goal $limit s); $(tail -1 "$WORK/$name.log")"
  complete "$dir"  # a cut run: the next phase waits for its --resume (the warm run needs the whole cache)
}

tables() {  # the runs beside the binaries, the goals, the warm run against the cold one
  local table=() run name
  [ -s "$TIMES" ] && table=(--deepbench "$TIMES")
  for name in train-cold:300 train-warm:150 server-cold:180; do
    run=$WORK/${name%%:*}
    [ -f "$run/results.jsonl" ] || { say "tables: no $run"; continue; }
    python3 tests/benchmarks/suite_pace.py "$run" "${table[@]}" --goal "${name#*:}" 2>&1 | tee -a "$LOG"
    python3 tests/benchmarks/where_time_went.py "$run" 2>&1 | tee -a "$LOG"
    tar -czf "$OUT/${name%%:*}.tgz" -C "$WORK" "${name%%:*}" "${name%%:*}.log"
  done
  if [ -f "$WORK/train-cold/results.jsonl" ] && [ -f "$WORK/train-warm/results.jsonl" ]; then
    python3 tests/benchmarks/suite_pace.py --families "$WORK/train-cold" "$WORK/train-warm" 2>&1 | tail -25 | tee -a "$LOG"
    # its kernels' times, the directions summed (compare's matching), in cycles where the clocks differ; 95% within 3%
    python3 tests/benchmarks/cycles_agreement.py "$WORK/train-cold" "$WORK/train-warm" --within 0.03 \
      >"$WORK/cycles.log" 2>&1; say "cold against warm (cycles_agreement.py, exit $?):"; grep SUMMARY "$WORK/cycles.log" | tee -a "$LOG"
  fi
}

binaries
suite_run train-cold train 300 "$WORK/cache-train" cold && \
suite_run train-warm train 150 "$WORK/cache-train" warm
suite_run server-cold inference-server 180 "$WORK/cache-server" cold
tables
say "pace_gpu: $SECONDS s in this call"
