#!/usr/bin/env bash
# Issue 20's GPU sessions on a lent H100 (no registry, no Docker): carries NVIDIA's bindings as wheels in
# .whl/ (nvmath-python, nvidia-cudnn-frontend; pydantic), installs the harness, then one phase:
#   bash tests/benchmarks/native_dev.sh tests        # the native backends' GPU tests (tests/test_gpu_native.py)
#   bash tests/benchmarks/native_dev.sh server       # inference-server with the new defaults -> runner/published,
#                                                    # then the native side-by-side of its GEMMs (and convs, time allowing)
#   bash tests/benchmarks/native_dev.sh train-gemm   # train's GEMMs and their native side-by-side, one sitting
#   bash tests/benchmarks/native_dev.sh profile      # train's wall time beside its samples: slices under a profiler
#   bash tests/benchmarks/native_dev.sh verify       # every GPU test; train's fp16 GEMMs beside native loops
#   bash tests/benchmarks/native_dev.sh train        # the train suite -> runner/published/nvidia-h100/train
#   bash tests/benchmarks/native_dev.sh finish-train # its --resume, new GPU tests, sparse-2of4, more side-by-sides
#   bash tests/benchmarks/native_dev.sh finish-server # the same again, with the server's fp16 convolutions
#   bash tests/benchmarks/native_dev.sh diagnose     # the server fp16 bwd_filter outliers; engine choice, continued
#   bash tests/benchmarks/native_dev.sh pin          # plan-name pins: cuDNN tests, server fp16 convs beside native
#                                                    # loops; a profile of the harness on a slice of train
#   bash tests/benchmarks/native_dev.sh gaps         # server fp16 convs (k=128) with --verify-timing beside their
#                                                    # pinned native loops (nsys where present); the 2:4 suite
#   bash tests/benchmarks/native_dev.sh repeat       # train's convolutions again (repeatability); the published
#                                                    # ones beside every candidate engine, shards FIRST..15
#   bash tests/benchmarks/native_dev.sh choice       # more of those shards (FIRST=K)
#   bash tests/benchmarks/native_dev.sh interleave   # interleaved.py: the server's fp16 convs, harness and
#                                                    # conv_loop's code in one process, in turns
#   bash tests/benchmarks/native_dev.sh server-fp16  # server fp16 convs beside their pinned native loops, each
#                                                    # in a process of its own (no candidate pass)
#   bash tests/benchmarks/native_dev.sh cupti        # the same convs with CUPTI never attached (--no-kernel-time)
#                                                    # and attached (the default), each beside the native loop
#   bash tests/benchmarks/native_dev.sh server-apart # inference-server with the defaults (engine race apart) ->
#                                                    # runner/published/nvidia-h100/inference-server, SERVER_LIMIT_S
#   bash tests/benchmarks/native_dev.sh close        # that run finished (--resume) where a call's limit cut it, its
#                                                    # int8 convolutions beside native loops, then every GPU test
#   bash tests/benchmarks/native_dev.sh graph-first  # a suite's GEMMs, then beside native loops in several orders
#                                                    # and settings (SUITE, PRECISION, ORDERS, MIN_US, SBS_ARGS),
#                                                    # or in one process with them, in turns (ORDERS=interleaved)
#   bash tests/benchmarks/native_dev.sh in-turns     # the published runs' fp16 GEMMs (IL_SETS) and their loop's code
#                                                    # in one process, in turns: interleaved.py, set after set
#   bash tests/benchmarks/native_dev.sh find         # issue 43: a suite's convolutions, then beside cuDNN's legacy
#                                                    # cudnnFind (conv_vs_find.py), one sitting per FIND_SETS entry
# Phases that write many files take OUT outside the call's $OUT and tar it: at most 8 files come back.
# Source it (`. native_dev.sh interleave`) to keep its environment for more commands.
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
build() {  # once a machine: a later phase of the same call finds the loops built from these sources
  local newest f files=(gemm_loop libgemm_loop.so)  # LOOPS=gemm (build_native.sh) builds these alone
  [ "${LOOPS:-gemm conv}" = gemm ] || files+=(conv_loop libconv_loop.so)
  newest=$(ls -t tests/benchmarks/{conv_loop.cpp,gemm_loop.cu,loop_timing.h,loop_lines.h} | head -1)
  for f in "${files[@]}"; do
    [ build/native/$f -nt "$newest" ] && continue
    bash tests/benchmarks/build_native.sh >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    return
  done
}
suite() {  # suite, seconds at most, extra deepbench-run arguments: -> runner/published/nvidia-h100/<suite>
  local dir=runner/published/nvidia-h100/$1 cmd
  cmd="deepbench-run --local --platform nvidia --suite $1 --quiet --out $dir ${*:3}"
  rm -rf "$dir"; echo "\$ $cmd" | tee "$OUT/suite-$1.log"
  local t0=$SECONDS; timeout "$2" $cmd >>"$OUT/suite-$1.log" 2>&1; echo "$1: $((SECONDS - t0)) s wall" | tee -a "$OUT/suite-$1.log"
  tail -3 "$OUT/suite-$1.log"; tar -czf "$OUT/suite-$1.tgz" "$dir"
}
gpu_tests() {  # seconds at most: the GPU tests of every GPU path (timing, native backends, models, NCCL)
  timeout "$1" python3 -m pytest -q -p no:cacheprovider tests/test_gpu_native.py tests/test_gpu.py \
    tests/test_timing_gpu_logic.py tests/test_model_level.py tests/test_all_reduce.py::test_single_gpu_nccl \
    --tb=short -rfE 2>&1 | tee "$OUT/gpu_tests.log" | tail -15
}
profiled() {  # name, seconds, deepbench-run arguments: the harness's worker under a profiler -> $OUT/<name>.*
              # (pyinstrument's wall-clock call tree where its wheel is in .whl/: <name>.txt and .pyisession;
              # else cProfile: <name>.prof)
  mkdir -p /tmp/hook; cat >/tmp/hook/sitecustomize.py <<'PY'
import atexit, os, sys
_out = os.environ.get("DEEPBENCH_PROFILE")
if _out and "deepbench.kernels.harness" in sys.orig_argv:
    try:
        from pyinstrument import Profiler
    except ImportError:
        import cProfile
        _profile = cProfile.Profile()
        _profile.enable()
        atexit.register(lambda: (_profile.disable(), _profile.dump_stats(_out + ".prof")))
    else:
        _profile = Profiler(interval=0.0005)
        _profile.start()

        def _save():
            session = _profile.stop()
            session.save(_out + ".pyisession")
            with open(_out + ".txt", "w") as f:
                f.write(_profile.output_text(unicode=False, color=False, show_all=False))
        atexit.register(_save)
PY
  local t0=$SECONDS; DEEPBENCH_PROFILE=$OUT/$1 PYTHONPATH=/tmp/hook:$PYTHONPATH timeout "$2" deepbench-run --local \
    --platform nvidia --warm-up 5 --quiet --out "runs/$1" "${@:3}" >"$OUT/$1.log" 2>&1
  echo "$1: $((SECONDS - t0)) s"; tail -1 "$OUT/$1.log"
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
train)  # the train suite with the defaults -> runner/published/nvidia-h100/train, and its wall time in one
        # piece (OUT may be the call's own: four files; the modules are compiled inside the timed run, as a
        # lent machine has no .pyc where an image has them)
  suite train "${TRAIN_LIMIT_S:-575}" ;;
finish-train)  # finish the published train run (--resume); the new GPU tests; the 2:4 suite; train's last fp16
               # GEMMs (runs/train-gemm-fp16, resumed) and the server's fp16 convolutions beside native loops
  t0=$SECONDS; timeout 120 deepbench-run --resume runner/published/nvidia-h100/train --quiet \
    >>"$OUT/suite-train.log" 2>&1; echo "train resume: $((SECONDS - t0)) s wall" | tee -a "$OUT/suite-train.log"
  tail -2 "$OUT/suite-train.log"; tar -czf "$OUT/suite-train.tgz" runner/published/nvidia-h100/train
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_native.py tests/test_structured_sparse.py \
    tests/test_gpu.py::test_cublas_receives_deepbench_problem \
    tests/test_model_level.py::test_backends_without_whole_models_say_why --tb=short -rfEs 2>&1 \
    | tee "$OUT/gpu_tests.log" | tail -12
  suite sparse-2of4 90
  build
  dir=runs/train-gemm-fp16; t0=$SECONDS; timeout 90 deepbench-run --resume $dir --quiet >"$OUT/run.log" 2>&1
  echo "train fp16 gemm resume: $((SECONDS - t0)) s"; tail -1 "$OUT/run.log"; tar -czf "$OUT/fp16.tgz" $dir
  timeout 60 python3 tests/benchmarks/native_side_by_side.py --min-us 20 $dir --only 'gemm/train/15[6-9]/fp16' --warm-up 0 --json "$OUT/sbs-fp16-rest.json" \
    >"$OUT/sbs-fp16-rest.log" 2>&1; grep SUMMARY "$OUT/sbs-fp16-rest.log"
  dir=runs/server-conv16; t0=$SECONDS
  timeout 120 deepbench-run --local --platform nvidia --suite inference-server --ops conv --precision fp16 --quiet \
    --out $dir >"$OUT/server-conv16.log" 2>&1; echo "server conv fp16: $((SECONDS - t0)) s"; tail -1 "$OUT/server-conv16.log"
  tar -czf "$OUT/server-conv16.tgz" $dir
  timeout 120 $SBS $dir --warm-up 0 --json "$OUT/sbs-server-conv16.json" >"$OUT/sbs-server-conv16.log" 2>&1
  grep SUMMARY "$OUT/sbs-server-conv16.log" ;;
finish-server)  # finish train (--resume); cuSPARSELt's tests and the 2:4 suite; the server's fp16 convolutions
                # beside native loops (engines and candidates). Run with OUT outside $OUT and tar it: at most
                # 8 files come back from a lent machine.
  t0=$SECONDS; timeout 110 deepbench-run --resume runner/published/nvidia-h100/train --quiet \
    >>"$OUT/suite-train.log" 2>&1; echo "train resume: $((SECONDS - t0)) s wall" | tee -a "$OUT/suite-train.log"
  tail -2 "$OUT/suite-train.log"
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_native.py -k "cusparse" \
    tests/test_structured_sparse.py --tb=short -rfEs 2>&1 | tee "$OUT/gpu_tests.log" | tail -8
  suite sparse-2of4 60
  build
  dir=runs/server-conv16; t0=$SECONDS
  timeout 170 deepbench-run --local --platform nvidia --suite inference-server --ops conv --precision fp16 --quiet \
    --out $dir >"$OUT/server-conv16.log" 2>&1; echo "server conv fp16: $((SECONDS - t0)) s"; tail -1 "$OUT/server-conv16.log"
  timeout 110 $SBS $dir --warm-up 0 --json "$OUT/sbs-server-conv16.json" >"$OUT/sbs-server-conv16.log" 2>&1
  grep SUMMARY "$OUT/sbs-server-conv16.log" ;;
diagnose)  # the server's fp16 bwd_filter outliers (harness 12x faster than the native loop on engines 49 and 33):
           # the harness with the profiler's cross-check, and the native loop's time for every candidate; then
           # the 2:4 suite finished and train's convolutions (runs/train-conv, measured on the last machine)
           # beside every candidate engine, in shards until the time runs out (the engine choice only: the
           # harness's times come from another machine)
  timeout 30 python3 tests/benchmarks/native_side_by_side.py --help >/dev/null
  dir=runs/server-diag; t0=$SECONDS
  timeout 70 deepbench-run --local --platform nvidia --suite inference-server --ops conv --precision fp16 \
    --where c=3,k=64 --verify-timing --warm-up 5 --quiet --out $dir >"$OUT/server-diag.log" 2>&1
  echo "server diag: $((SECONDS - t0)) s"; tail -1 "$OUT/server-diag.log"
  t0=$SECONDS; timeout 50 deepbench-run --resume runner/published/nvidia-h100/sparse-2of4 --quiet \
    >"$OUT/suite-sparse-2of4.log" 2>&1; echo "sparse-2of4 resume: $((SECONDS - t0)) s"; tail -1 "$OUT/suite-sparse-2of4.log"
  build
  timeout 40 $SBS $dir runs/server-conv16 --only 'conv/inference_server/015/fp16*' --candidate-seconds 0.05 \
    --warm-up 0 --json "$OUT/sbs-diag.json" >"$OUT/sbs-diag.log" 2>&1; grep SUMMARY "$OUT/sbs-diag.log"
  for i in 0 1 2 3 4 5 6 7; do
    timeout 55 $SBS runs/train-conv --shard $i/8 --warm-up 0 --json "$OUT/sbs-train-conv-$i.json" \
      >"$OUT/sbs-train-conv-$i.log" 2>&1; grep SUMMARY "$OUT/sbs-train-conv-$i.log"
  done ;;
pin)  # conv_loop with plan-name pins and candidates told apart by name (compiled here first); cuDNN's GPU
      # tests with the plan-name pin; the server's fp16 convolutions measured and run beside native loops
      # (pinned plans and every candidate); a cProfile of the harness (sitecustomize hook) on a slice of train
  build
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_native.py -k cudnn --tb=short -rfE 2>&1 \
    | tee "$OUT/gpu_tests.log" | tail -6
  dir=runs/server-conv16; t0=$SECONDS
  timeout 170 deepbench-run --local --platform nvidia --suite inference-server --ops conv --precision fp16 --quiet \
    --out $dir >"$OUT/server-conv16.log" 2>&1; echo "server conv fp16: $((SECONDS - t0)) s"; tail -1 "$OUT/server-conv16.log"
  timeout 130 $SBS $dir --warm-up 0 --json "$OUT/sbs-server-conv16.json" >"$OUT/sbs-server-conv16.log" 2>&1
  grep SUMMARY "$OUT/sbs-server-conv16.log"
  profiled slice 90 --suite train --ops gemm,conv,rnn --limit 8 ;;
server-fp16)  # the server's fp16 convolutions measured (RUN_ARGS: more deepbench-run arguments) and beside their
              # pinned native loops, each in a process of its own (as pin, without the candidate pass; SBS_ARGS:
              # more side-by-side arguments, e.g. "--candidate-seconds 0.01 --find-first", SBS_TIMEOUT its limit)
  build
  dir=runs/server-conv16; t0=$SECONDS
  timeout 250 deepbench-run --local --platform nvidia --suite inference-server --ops conv --precision fp16 --quiet \
    --out $dir ${RUN_ARGS:-} >"$OUT/server-conv16.log" 2>&1; echo "server conv fp16: $((SECONDS - t0)) s"
  tail -1 "$OUT/server-conv16.log"
  timeout "${SBS_TIMEOUT:-130}" $SBS $dir --warm-up 0 --candidate-seconds 0 ${SBS_ARGS:-} --json "$OUT/sbs-server-conv16.json" \
    >"$OUT/sbs-server-conv16.log" 2>&1
  grep SUMMARY "$OUT/sbs-server-conv16.log"; tar -czf "$OUT/server-conv16.tgz" $dir ;;
gaps)  # why the harness timed some short fp16 convolutions 1-2 us a call slower than conv_loop on the same plan:
       # the profiler's kernels, span and period per call (--verify-timing) beside the pinned native loop
       # (and nsys's kernel list for it, where nsys is installed); then the 2:4 suite (dense side in TN)
  build
  dir=runs/diag128; t0=$SECONDS
  timeout 120 deepbench-run --local --platform nvidia --suite inference-server --ops conv --precision fp16 \
    --where k=128 --verify-timing --warm-up 5 --quiet --out $dir >"$OUT/diag128.log" 2>&1
  echo "diag128: $((SECONDS - t0)) s"; tail -1 "$OUT/diag128.log"
  timeout 60 $SBS $dir --candidate-seconds 0 --warm-up 0 --json "$OUT/sbs-diag128.json" >"$OUT/sbs-diag128.log" 2>&1
  grep SUMMARY "$OUT/sbs-diag128.log"
  if command -v nsys >/dev/null; then
    line=$(python3 tests/benchmarks/native_side_by_side.py $dir --only '*/022/*' --candidate-seconds 0 --dry-run \
           | grep '^fp16 fwd' | head -1)
    echo "$line" | timeout 60 nsys profile -o "$OUT/conv022" --force-overwrite true build/native/conv_loop \
      >"$OUT/nsys.log" 2>&1; timeout 60 nsys stats -r cuda_gpu_trace "$OUT/conv022.nsys-rep" 2>/dev/null | head -80 \
      >"$OUT/nsys-trace.txt"
  else echo "no nsys here"; fi
  suite sparse-2of4 120 ;;
cupti)  # does CUPTI, attached to the harness's process for kernel-time parts (and left attached), slow the
        # multi-kernel calls that events time? server fp16 convs (k=128) with --no-kernel-time, then with the
        # default, each beside its pinned native loop
  build
  for mode in no-kernel-time kernel-time; do
    dir=runs/k128-$mode; t0=$SECONDS
    timeout 100 deepbench-run --local --platform nvidia --suite inference-server --ops conv --precision fp16 \
      --where k=128 --$mode --warm-up 5 --quiet --out $dir >"$OUT/$mode.log" 2>&1
    echo "$mode: $((SECONDS - t0)) s"; tail -1 "$OUT/$mode.log"
    timeout 60 $SBS $dir --candidate-seconds 0 --warm-up 0 --json "$OUT/sbs-$mode.json" >"$OUT/sbs-$mode.log" 2>&1
    grep SUMMARY "$OUT/sbs-$mode.log"
  done ;;
repeat|choice)  # repeat: train's convolutions on another machine than the published run's (the same harness:
                # repeatability), then, for both phases, the published run's convolutions of 20 us or more
                # beside every candidate cuDNN offers (the engine choice), in 16 shards from $FIRST while time is left
  if [ "$PHASE" = repeat ]; then
    dir=runs/train-conv; t0=$SECONDS
    timeout 285 deepbench-run --local --platform nvidia --suite train --ops conv --quiet --out $dir \
      >"$OUT/train-conv.log" 2>&1; echo "train conv: $((SECONDS - t0)) s"; tail -1 "$OUT/train-conv.log"
    tar -czf "$OUT/train-conv.tgz" $dir
  fi
  build
  for i in $(seq "${FIRST:-0}" 15); do
    [ $((SECONDS + 50)) -lt "${DEADLINE_S:-560}" ] || { echo "shards from $i left for later"; break; }
    timeout 50 $SBS runner/published/nvidia-h100/train --only 'conv/*' --shard $i/16 --max-seconds 0.05 --warm-up 0 \
      --json "$OUT/sbs-train-conv-$i.json" >"$OUT/sbs-train-conv-$i.log" 2>&1; echo "shard $i: $(grep 'choice:' "$OUT/sbs-train-conv-$i.log" | tr '\n' ' ')"
  done ;;
interleave)  # the server's fp16 convolutions: the harness's measurement and conv_loop's code in one process, in
            # turns (tests/benchmarks/interleaved.py, IL_ARGS: more of its arguments), in shards; the
            # engine race of conv/train/047 fp16 again
  build
  for i in 0 1 2; do
    timeout 160 python3 tests/benchmarks/interleaved.py runner/published/nvidia-h100/inference-server \
      --only 'conv/inference_server/*/fp16' --shard $i/3 --warm-up $([ $i = 0 ] && echo 20 || echo 5) ${IL_ARGS:-} \
      --json "$OUT/interleaved-$i.json" >"$OUT/interleaved-$i.log" 2>&1; echo "shard $i: $(grep 'SUMMARY' "$OUT/interleaved-$i.log")"
  done
  timeout 60 $SBS runner/published/nvidia-h100/train --only 'conv/train/047/fp16' --candidate-seconds 0.1 --warm-up 0 \
    --json "$OUT/sbs-train-047.json" >"$OUT/sbs-train-047.log" 2>&1; grep SUMMARY "$OUT/sbs-train-047.log" ;;
profile)  # where train's wall time goes besides its samples: slices of its convolutions, GEMMs and RNNs under a
          # profiler (pyinstrument where its wheel is in .whl/, else cProfile)
  profiled conv 120 --suite train --ops conv --limit 12
  profiled gemm 90 --suite train --ops gemm --limit 40
  profiled rnn 80 --suite train --ops rnn --limit 10 ;;
verify)  # the GPU tests of every GPU path (timing strategies, native backends, models, NCCL), then train's
         # fp16 GEMMs beside native loops timed as long as the harness timed them
  gpu_tests 230
  build
  dir=runs/train-gemm-fp16; t0=$SECONDS
  timeout 150 deepbench-run --local --platform nvidia --suite train --ops gemm --precision fp16 --quiet --out $dir \
    >"$OUT/run.log" 2>&1; echo "train fp16 gemm: $((SECONDS - t0)) s"; tail -1 "$OUT/run.log"; tar -czf "$OUT/fp16.tgz" $dir
  timeout 170 python3 tests/benchmarks/native_side_by_side.py --min-us 20 $dir --warm-up 0 --json "$OUT/sbs.json" \
    >"$OUT/sbs.log" 2>&1; grep SUMMARY "$OUT/sbs.log" ;;
server-apart)  # the inference-server suite with the defaults -> runner/published/nvidia-h100/inference-server
               # (about 560 s on an H100: a call's limit may cut it; `close` finishes it on the same machine)
  suite inference-server "${SERVER_LIMIT_S:-560}" ;;
close)  # finish that run where it stopped (--resume), the server's int8 convolutions measured there beside their
        # native loops (and every candidate engine), then the GPU tests of every GPU path
  dir=runner/published/nvidia-h100/inference-server
  if ! grep -q '"state": *"complete"' $dir/run.json; then
    t0=$SECONDS; timeout 200 deepbench-run --resume $dir --quiet >>"$OUT/suite-inference-server.log" 2>&1
    echo "resume: $((SECONDS - t0)) s wall" | tee -a "$OUT/suite-inference-server.log"; tail -3 "$OUT/suite-inference-server.log"
  fi
  tar -czf "$OUT/suite-inference-server.tgz" $dir
  build
  timeout 120 $SBS $dir --only 'conv/*/int8' --warm-up 0 --json "$OUT/sbs-server-conv8.json" >"$OUT/sbs-server-conv8.log" 2>&1
  grep SUMMARY "$OUT/sbs-server-conv8.log"
  gpu_tests "${TESTS_LIMIT_S:-300}" ;;
graph-first)  # does the loops' order move the fp16 GEMM side-by-side at the power cap? One harness run, then the
              # native loops as long as the harness measured, graph first / host loop first / graph first again;
              # SUITE (inference-server) and PRECISION (fp16) choose the GEMMs,
              # ORDERS the side-by-sides (graph-first stream-first graph-first-again; a name starting graph-first times
              # the graph first, any other the host loop first, the loops' default; one containing `rest` adds
              # --rest-as-harness; one starting `interleaved` runs interleaved.py instead: the harness's measurement
              # and gemm_loop's code in one process, in turns, IL_ARGS more of its arguments), MIN_US the shortest
              # problem the loops run (default 20; 0: every problem, in the harness's order, so each has the same
              # predecessor), SBS_ARGS more side-by-side arguments (e.g. --max-seconds 0.5).
              # Twelve files: `OUT=/tmp/gf bash tests/benchmarks/native_dev.sh graph-first; tar -czf $OUT/gf.tgz -C /tmp/gf .`
  t0=$SECONDS; build; echo "loops built: $((SECONDS - t0)) s"  # before the harness: no compile beside its timing
  suite=${SUITE:-inference-server} precision=${PRECISION:-fp16}; dir=build/gemm-$suite-$precision; t0=$SECONDS
  timeout "${RUN_LIMIT_S:-150}" deepbench-run --local --platform nvidia --suite $suite --ops gemm \
    --precision $precision --quiet --out $dir >"$OUT/run.log" 2>&1
  echo "harness: $((SECONDS - t0)) s"; tail -1 "$OUT/run.log"
  files=()
  for order in ${ORDERS:-graph-first stream-first graph-first-again}; do
    if [[ $order == interleaved* ]]; then  # the harness and gemm_loop's code in one process, in turns
      timeout "${IL_LIMIT_S:-300}" python3 tests/benchmarks/interleaved.py --no-kernel-time --warm-up 5 ${IL_ARGS:-} \
        $dir --json "$OUT/sbs-$order.json" >"$OUT/sbs-$order.log" 2>&1
    else
      args=(); [[ $order == graph-first* ]] && args=(--graph-first); [[ $order == *rest* ]] && args+=(--rest-as-harness)
      timeout "${SBS_LIMIT_S:-90}" python3 tests/benchmarks/native_side_by_side.py --min-us "${MIN_US:-20}" \
        --candidate-seconds 0 --warm-up 0 "${args[@]}" ${SBS_ARGS:-} $dir --json "$OUT/sbs-$order.json" >"$OUT/sbs-$order.log" 2>&1
    fi
    echo "$order: $(grep -E '^(SUMMARY|CLOCKS)' "$OUT/sbs-$order.log")"; files+=("$OUT/sbs-$order.json")
  done
  tar -czf "$OUT/run.tgz" $dir ;;
in-turns)  # issue 20's fp16 GEMM side-by-side where both sides run on the same stretch of the power limiter:
           # interleaved.py on the published runs, one set after another. IL_SETS: SUITE:GLOB ... (default the fp16
           # GEMMs of inference-server, then of train), IL_LIMIT_S each (default 300; a set cut by it keeps the
           # results measured), IL_ARGS more of interleaved.py's arguments. Two files per set: il-<n>.log, il-<n>.json.
  read -ra sets <<<"${IL_SETS:-inference-server:gemm/inference_server/*/fp16 train:gemm/train/*/fp16}"
  [[ " ${sets[*]}" == *:conv/* ]] || export LOOPS=gemm  # GEMMs alone: conv_loop's minute of compiling spared
  t0=$SECONDS; build; echo "loops built: $((SECONDS - t0)) s"
  n=0
  for set in "${sets[@]}"; do
    n=$((n + 1)); t0=$SECONDS
    timeout "${IL_LIMIT_S:-300}" python3 tests/benchmarks/interleaved.py "runner/published/nvidia-h100/${set%%:*}" \
      --only "${set#*:}" --no-kernel-time --warm-up 5 ${IL_ARGS:-} --json "$OUT/il-$n.json" >"$OUT/il-$n.log" 2>&1
    echo "$set ($((SECONDS - t0)) s): $(grep -E '^(SUMMARY|CLOCKS)' "$OUT/il-$n.log")"
  done ;;
find)  # issue 43's evidence: each FIND_SETS entry SUITE:PRECISIONS (default train:fp32; e.g. train:fp16,
       # inference-server:fp16,int8) measured by the harness (--ops conv, RUN_LIMIT_S), then at once beside cudnnFind's
       # fastest correct algorithm for the same problems (conv_vs_find.py, FIND_LIMIT_S, FIND_ARGS more of its
       # arguments). conv_find is built alone (LOOPS=find: seconds). Per set: <set>.log (rows, SUMMARY), <set>.json,
       # <set>.txt (conv_find's raw output, for --from-output), <set>-run.tgz (the run and its log).
  t0=$SECONDS; LOOPS=find bash tests/benchmarks/build_native.sh >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  echo "conv_find built: $((SECONDS - t0)) s"
  for set in ${FIND_SETS:-train:fp32}; do
    suite=${set%%:*} precision=${set#*:}; name=find-$suite-${precision//,/-}; dir=runs/$name; t0=$SECONDS
    mkdir -p runs; rm -rf "$dir"  # this phase's own run of an earlier call on the same machine
    timeout "${RUN_LIMIT_S:-300}" deepbench-run --local --platform nvidia --suite "$suite" --ops conv \
      --precision "$precision" --quiet --out "$dir" >"$dir.log" 2>&1
    echo "$name harness: $((SECONDS - t0)) s"; tail -1 "$dir.log"; t0=$SECONDS
    python3 tests/benchmarks/where_time_went.py "$dir" | tee -a "$dir.log"  # which phase to cut (issue 43: train < 10 min)
    timeout "${FIND_LIMIT_S:-300}" python3 tests/benchmarks/conv_vs_find.py "$dir" ${FIND_ARGS:-} --json "$OUT/$name.json" \
      --save-output "$OUT/$name.txt" >"$OUT/$name.log" 2>&1
    echo "$name conv_vs_find: $((SECONDS - t0)) s"; grep -E '^(SUMMARY|  worst)' "$OUT/$name.log"
    tar -czf "$OUT/$name-run.tgz" "$dir" "$dir.log"
  done ;;
esac
