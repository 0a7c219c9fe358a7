#!/usr/bin/env bash
# Issue 47 on one node of several GPUs (a lent nvidia-h100-x2 / h200-x2 machine: no registry, no Docker):
# every collective through the harness (CUDA graph replays and eager calls) beside nccl-tests built here
# against the NCCL PyTorch loads, then the side-by-side. Under 9 minutes on 2 GPUs (BUDGET_S).
#
#   NCCL_TESTS_SRC=shared/anchors/nccl-tests bash tests/benchmarks/collectives_gpu.sh
#   DRY_RUN=1 NCCL_TESTS_SRC=... bash tests/benchmarks/collectives_gpu.sh   # print the GPU steps, run none
#
# Wheels carried in .whl/ are installed first (pydantic & co. for a bare machine; nccl4py with cuda-core,
# cuda-pathfinder and cuda-bindings: the cuda_bindings wheel whose major matches torch.version.cuda is the
# one installed). Settings (environment):
#   NCCL_TESTS_SRC  required: nccl-tests' source folder (copied, then built with make -C src)
#   NGPUS           default: every GPU
#   RANKS           default: NGPUS; several ("2 4") run everything at each count, on the first GPUs
#   MODES           default "eager graph": nccl-tests without and with -G, the harness eager and by graphs
#   NT_REPEATS      default 1: nccl-tests' runs again into nccl-tests-r<N>/ (how far nccl-tests agrees with itself),
#                   each set beside the harness in side_by_side[_r<N>].txt; the 100,000-float runs in the first only
#   NT_REPEAT_ARGS  default NCCL_TESTS_ARGS: the repeats' arguments (e.g. -n 1000: is nccl-tests' own figure
#                   the same over ten times the iterations per launch?)
#   BUFFERS         default 1: collective_buffers.py (PyTorch's allocator beside ncclMemAlloc) at each rank count
#   BUDGET_S        default 530: seconds for everything before the tarball
#   NT_BUDGET_S     default 180: nccl-tests' share of it
#   HARNESS_ARGS    default "--fast --time-cap 0.3"
#   NCCL_TESTS_ARGS default "-b 8 -e 1G -f 2 -n 100 -w 10"
#   MIN_FLOATS      default 1048576: the harness's sizes besides 100,000 floats (2: the whole suite)
#   SPLIT_FLOATS    default 16777217: sizes above it are measured (graph only) after the eager latency run
#   LARGE           default 1; 0: no sizes above SPLIT_FLOATS (give nccl-tests -e to match)
#   GENCODE         default: the first GPU's compute capability
#   SKIP_INSTALL    1: the wheels and the package are installed already (PYTHONPATH set by the caller)
#   WORK            default /tmp/collectives47: the working folder (emptied first if this script made it;
#                   a folder of other files is refused)
# Writes $OUT/collectives47.tgz holding: device.txt, install.log, build.log, nccl-tests/<coll>{,_graph}_n<ranks>.txt,
# buffers_n<ranks>.log (collective_buffers.py: PyTorch's allocator beside ncclMemAlloc),
# runs/n<ranks>_{graph_latency,graph,eager_latency,graph_large,eager} (deepbench-run folders, each with a COMMAND file),
# side_by_side.txt and side_by_side.json, steps.log (each step's command, seconds and exit status), each
# step's log; also $OUT/side_by_side.txt and $OUT/steps.log apart, and the side-by-side on stdout.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
WORK=${WORK:-/tmp/collectives47}
# Emptied first only where it is this script's own (its steps.log) or empty: never a folder it did not write.
if [ -d "$WORK" ] && [ -n "$(ls -A "$WORK")" ] && [ ! -f "$WORK/steps.log" ]; then
  echo "WORK=$WORK holds files this script did not write: name an empty or new folder" >&2; exit 2
fi
rm -rf "$WORK"; mkdir -p "$WORK/nccl-tests" "$WORK/runs"; : >"$WORK/steps.log"  # its mark
# NVLink multicast stays off on shared hosts (KINDS.md): NCCL, PyTorch and NVSHMEM.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DRY=${DRY_RUN:-0}
BUDGET=${BUDGET_S:-530}
HARNESS_ARGS=${HARNESS_ARGS:---fast --time-cap 0.3}
NCCL_TESTS_ARGS=${NCCL_TESTS_ARGS:--b 8 -e 1G -f 2 -n 100 -w 10}
MIN_FLOATS=${MIN_FLOATS:-1048576}
SPLIT_FLOATS=${SPLIT_FLOATS:-16777217}
COLLECTIVES="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"
LATENCY_BYTES=400000  # DeepBench's 100,000 floats: the issue's time target
START=$SECONDS
left() { echo $((BUDGET - (SECONDS - START))); }

# step NAME SECONDS_AT_MOST COMMAND...: run it (stdout+stderr to $WORK/NAME.log) under a timeout that
# leaves the rest of the budget to the later steps; DRY_RUN=1 prints it instead.
step() {
  local name=$1 cap=$2; shift 2
  local limit; limit=$(left); [ "$cap" -lt "$limit" ] && limit=$cap
  if [ "$limit" -le 5 ]; then echo "skipped (budget spent): $name: $*" | tee -a "$WORK/steps.log"; return 1; fi
  if [ "$DRY" = 1 ]; then echo "dry run: $name (<= ${limit}s): $*" | tee -a "$WORK/steps.log"; return 0; fi
  local t0=$SECONDS
  timeout -s TERM -k 10 "$limit" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc $((SECONDS - t0))s: $*" | tee -a "$WORK/steps.log"
  return $rc
}

# say COMMAND...: run it, or print it under DRY_RUN=1 (installs change the machine's Python)
say() { if [ "$DRY" = 1 ]; then echo "dry run: $*"; else "$@"; fi; }

finish() {  # everything but nccl-tests' source, build, NCCL links and MPICH; the side-by-side also apart
  cp "$WORK"/side_by_side*.txt "$WORK"/steps.log "$OUT/" 2>/dev/null
  tar -C "$WORK" --exclude=./nccl-tests-src --exclude=./nccl-tests-build --exclude=./nccl --exclude=./mpich \
    -czf "$OUT/collectives47.tgz" . && ls -la "$OUT"
}
trap finish EXIT

if [ -z "${NCCL_TESTS_SRC:-}" ] || [ ! -d "$NCCL_TESTS_SRC/src" ]; then
  echo "NCCL_TESTS_SRC must name nccl-tests' source folder (with src/)" >&2; exit 2
fi

# (a) carried wheels: all but cuda_bindings, then the cuda_bindings of torch's CUDA major (if not already there);
# SKIP_INSTALL=1: the caller installed them and the package (PYTHONPATH set)
if [ "${SKIP_INSTALL:-0}" = 1 ]; then
  echo "install skipped (SKIP_INSTALL=1)" >"$WORK/install.log"
elif ls .whl/*.whl >/dev/null 2>&1; then
  wheels=()
  for w in .whl/*.whl; do [[ $(basename "$w") == cuda_bindings-* ]] || wheels+=("$w"); done
  say python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${wheels[@]}" \
    >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  major=$(python3 -c "import torch; print((torch.version.cuda or '0').split('.')[0])" 2>/dev/null)
  if ! python3 -c "import cuda.bindings" 2>/dev/null; then
    bindings=""
    for w in .whl/cuda_bindings-"$major".*.whl; do [ -f "$w" ] && bindings=$w; done
    if [ -n "$bindings" ]; then
      say python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$bindings" \
        >>"$WORK/install.log" 2>&1
    else
      echo "no .whl/cuda_bindings-$major.*.whl: nccl4py will not load, torch.distributed's calls are used" \
        | tee -a "$WORK/install.log"
    fi
  fi
fi
[ "${SKIP_INSTALL:-0}" = 1 ] || say python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . \
  >>"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; exit 1; }
python3 -c "from deepbench.kernels.backends.nccl.nccl4py_comm import nccl4py_unavailable as u; \
print('nccl4py:', u() or 'loads')" | tee -a "$WORK/install.log"
if [ "$DRY" = 1 ]; then
  NGPUS=${NGPUS:-2}; GENCODE=${GENCODE:--gencode=arch=compute_90,code=sm_90}
else
  { nvidia-smi -L; nvidia-smi topo -m; } >"$WORK/device.txt" 2>&1; cat "$WORK/device.txt"
  NGPUS=${NGPUS:-$(python3 -c "import torch; print(torch.cuda.device_count())")}
  cc=$(python3 -c "import torch; print(''.join(map(str, torch.cuda.get_device_capability())))")
  GENCODE=${GENCODE:--gencode=arch=compute_$cc,code=sm_$cc}
fi

# (b) nccl-tests against the NCCL PyTorch loads: NCCL_HOME holds include/nccl.h and lib/libnccl.so from
# PyTorch's nvidia-nccl package (nvidia/nccl for CUDA 12 wheels; found by name under nvidia/ for any layout)
NCCL_HOME=$WORK/nccl; mkdir -p "$NCCL_HOME/lib" "$NCCL_HOME/include"
nvidia=$(python3 -c "import nvidia; print(*nvidia.__path__)" 2>/dev/null)
header=""; so=""
if [ -n "$nvidia" ]; then
  # shellcheck disable=SC2086 # nvidia.__path__ may list several folders
  header=$(find $nvidia -name nccl.h -path '*include*' 2>/dev/null | head -1)
  # shellcheck disable=SC2086
  so=$(find $nvidia -name 'libnccl.so*' 2>/dev/null | head -1)
fi
if [ -n "$header" ] && [ -n "$so" ]; then
  # the whole folder: nccl.h includes headers of its own subfolders (nccl_device/impl/...)
  rm -rf "$NCCL_HOME/include"; ln -s "$(dirname "$header")" "$NCCL_HOME/include"
  ln -sf "$so" "$NCCL_HOME/lib/libnccl.so"; ln -sf "$so" "$NCCL_HOME/lib/libnccl.so.2"
  echo "NCCL_HOME=$NCCL_HOME: $header, $so" | tee -a "$WORK/steps.log"
elif [ "$DRY" != 1 ]; then
  echo "no nccl.h and libnccl.so under PyTorch's nvidia packages (${nvidia:-none}): nccl-tests cannot be built" \
    "against its NCCL" | tee -a "$WORK/steps.log"
fi
export LD_LIBRARY_PATH=$NCCL_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cp -r "$NCCL_TESTS_SRC" "$WORK/nccl-tests-src"
BIN=$WORK/nccl-tests-build
# Like with like: the harness runs one process per GPU (NCCL may take other paths inside one process). With an
# MPI at hand (MPICH's wheel carried in .whl/, unpacked here) nccl-tests is built with MPI=1 and run the same way
# (mpiexec -n N ... -g 1); without one, one process drives every GPU (-g N), and steps.log says which. (On two
# H200s the two layouts read within 1-7% of each other: tests/benchmarks/results/collectives-h200x2.)
MPI_HOME=""
for w in .whl/mpich-*.whl; do  # a wheel is a zip; the lent machine has no unzip, and zipfile keeps no modes
  [ -f "$w" ] && python3 -m zipfile -e "$w" "$WORK/mpich" && for d in "$WORK"/mpich/mpich-*.data/data; do
    chmod +x "$d"/bin/*; MPI_HOME=$d
  done
done
if [ -n "$MPI_HOME" ]; then
  export LD_LIBRARY_PATH=$MPI_HOME/lib:$LD_LIBRARY_PATH
  echo "nccl-tests: one process per GPU (MPI=1, $MPI_HOME)" | tee -a "$WORK/steps.log"
else
  echo "nccl-tests: one process drives all $NGPUS GPUs (no MPICH from .whl/mpich-*.whl: not the harness's layout)" \
    | tee -a "$WORK/steps.log"
fi
step build 180 make -C "$WORK/nccl-tests-src/src" -j16 NCCL_HOME="$NCCL_HOME" BUILDDIR="$BIN" \
  NVCC_GENCODE="$GENCODE" ${MPI_HOME:+MPI=1 MPI_HOME=$MPI_HOME} || echo "nccl-tests did not build: see build.log"

# (c) nccl-tests, every collective: eager, then CUDA graphs (-G 1: the -n iterations captured once and launched
# once), then each at DeepBench's 100,000 floats; at most NT_BUDGET_S (default 180) seconds for all of them
RANKS=${RANKS:-$NGPUS}
MODES=${MODES:-eager graph}
NT_END=$((SECONDS + ${NT_BUDGET_S:-180}))
nt_cap() { local c=$((NT_END - SECONDS)); [ "$c" -gt "$1" ] && c=$1; [ "$c" -lt 0 ] && c=0; echo "$c"; }
for rep in $(seq 1 "${NT_REPEATS:-1}"); do
  dest=$WORK/nccl-tests; [ "$rep" -gt 1 ] && dest=$WORK/nccl-tests-r$rep
  mkdir -p "$dest"
  for n in $RANKS; do
    if [ -n "$MPI_HOME" ]; then LAUNCH=("$MPI_HOME/bin/mpiexec" -n "$n"); PER_PROCESS=1; else LAUNCH=(); PER_PROCESS=$n; fi
    for coll in $COLLECTIVES; do
      for mode in $MODES; do
        graph=""; [ "$mode" = graph ] && graph="-G 1"
        name=${coll}${graph:+_graph}_n$n
        log=nt_${name}_r$rep
        # only what finished goes to the side-by-side (a failed binary's log stays in its step log)
        args=$NCCL_TESTS_ARGS; [ "$rep" -gt 1 ] && args=${NT_REPEAT_ARGS:-$NCCL_TESTS_ARGS}
        # shellcheck disable=SC2086 # the argument lists are word lists
        step "$log" "$(nt_cap 60)" "${LAUNCH[@]}" "$BIN/${coll}_perf" -g "$PER_PROCESS" $args $graph \
          && cat "$WORK/$log.log" >>"$dest/$name.txt"
        [ "$rep" -gt 1 ] && continue
        # shellcheck disable=SC2086
        step "${log}_latency" "$(nt_cap 30)" "${LAUNCH[@]}" "$BIN/${coll}_perf" -g "$PER_PROCESS" \
          -b $LATENCY_BYTES -e $LATENCY_BYTES -n 100 -w 10 $graph && cat "$WORK/${log}_latency.log" >>"$dest/$name.txt"
      done
    done
    # The allocator's share of the difference: PyTorch's caching allocator beside ncclMemAlloc, NCCL's calls alike
    if [ "$rep" = 1 ] && [ "${BUFFERS:-1}" = 1 ]; then
      step "buffers_n$n" 60 python3 -m torch.distributed.run --nproc-per-node "$n" tests/benchmarks/collective_buffers.py
    fi
  done
done

# (d) the harness, every collective: at DeepBench's 100,000 floats (the time target) and from MIN_FLOATS up
# (the busbw target: 4 MiB and more), by CUDA graph replays, then eagerly (the time left decides how far the
# last run gets; results measured so far stay in its folder)
harness() {  # harness RANKS NAME CAP ARGS...
  local n=$1 name=n$1_$2 cap=$3; shift 3
  local dir=$WORK/runs/$name
  local cmd="deepbench-run --local --platform nvidia --suite collectives --ranks $n --kernel-timeout 120 $HARNESS_ARGS $* --quiet --out $dir"
  # shellcheck disable=SC2086
  step "harness_$name" "$cap" $cmd
  [ -d "$dir" ] && printf '# %s of %s GPUs (%s), NCCL_NVLS_ENABLE=0, %s:\n%s\n' "$n" "$NGPUS" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" "$(date -u +%F)" "$cmd" >"$dir/COMMAND"
}
# Each run goes collective by collective, sizes ascending: the middle sizes come first for every collective,
# the largest (whose exact expected results take the host seconds to compute) in a run of their own. Each rank
# count gets its share of the time left.
counts=$(echo "$RANKS" | wc -w); i=0
for n in $RANKS; do
  share=$(($(left) / (counts - i))); i=$((i + 1)); t0=$SECONDS
  harness "$n" graph_latency 90 --collective-timing graph --where floats=100000
  cap=$((share / 3)); [ "${LARGE:-1}" = 1 ] || cap=$((share - (SECONDS - t0) - 5))  # without the large sizes: the rest
  harness "$n" graph "$cap" --collective-timing graph --where "floats>=$MIN_FLOATS,floats<=$SPLIT_FLOATS"
  case " $MODES " in *" eager "*) harness "$n" eager_latency 90 --collective-timing eager --where floats=100000 ;; esac
  [ "${LARGE:-1}" = 1 ] && harness "$n" graph_large $((share - (SECONDS - t0) - 10)) --collective-timing graph --where "floats>$SPLIT_FLOATS"
  case " $MODES " in *" eager "*)
    harness "$n" eager $((share - (SECONDS - t0))) --collective-timing eager --where "floats>=4194304,floats<=$SPLIT_FLOATS" ;;
  esac
done

# (e) the side-by-side, once per set of nccl-tests' runs
runs=$(ls -d "$WORK"/runs/*/ 2>/dev/null)
for dest in "$WORK"/nccl-tests "$WORK"/nccl-tests-r*; do
  [ -d "$dest" ] || continue
  suffix=${dest#"$WORK"/nccl-tests}; suffix=${suffix/-/_}
  files=$(ls "$dest"/*.txt 2>/dev/null)
  if [ "$DRY" = 1 ]; then
    echo "dry run: side-by-side of: ${runs:-<runs>} with ${files:-<nccl-tests files>}"
  elif [ -n "$runs" ] && [ -n "$files" ]; then
    # shellcheck disable=SC2086
    python3 tests/benchmarks/collectives_vs_nccl_tests.py $runs --nccl-tests $files \
      --json "$WORK/side_by_side$suffix.json" 2>&1 | tee "$WORK/side_by_side$suffix.txt" | grep -v '^no nccl-tests figure' | tail -3
  else
    echo "nothing to set side by side (runs: ${runs:-none}; nccl-tests outputs: ${files:-none})" | tee "$WORK/side_by_side$suffix.txt"
  fi
done
echo "total: $((SECONDS - START)) s"
