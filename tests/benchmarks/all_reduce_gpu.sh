#!/usr/bin/env bash
# Issues 6 and 10's GPU figures: NCCL all-reduce on one node of 2, 4 and 8 GPUs (a lent nvidia-h200-x8
# machine: no registry, no Docker; pydantic travels as wheels in .whl/, see README "NVIDIA GPUs").
#   bash tests/benchmarks/all_reduce_gpu.sh   # single-GPU tests, then --ranks 2, 4 and 8 (as many as there are GPUs)
# Results folders go to /tmp/published/nvidia-<gpu>x<N>/all_reduce, each with a COMMAND file saying what made it;
# a tarball and logs to $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
# NVLink multicast stays off on shared hosts (KINDS.md): NCCL, PyTorch and NVSHMEM.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
{ nvidia-smi -L; nvidia-smi topo -m; } | tee "$OUT/device.txt"
GPUS=$(python3 -c "import torch;print(torch.cuda.device_count())")
DEV=$(python3 -c "import torch;print(torch.cuda.get_device_name().split()[1].lower())")
python3 -m pytest -q -p no:cacheprovider tests/test_all_reduce.py -k "single_gpu or one_rank" 2>&1 | tail -5 | tee "$OUT/tests.log"
NCCL=$(python3 -c "import torch;print('.'.join(map(str, torch.cuda.nccl.version())))")
TORCH=$(python3 -c "import torch;print(torch.__version__)")
for n in 2 4 8; do
  [ "$n" -le "$GPUS" ] || continue
  dir=/tmp/published/nvidia-${DEV}x$n/all_reduce
  cmd="deepbench-run --local --platform nvidia --suite train --ops all_reduce --ranks $n --out $dir"
  echo "\$ $cmd"; t0=$SECONDS; $cmd 2>&1 | tail -16; echo "ranks $n: $((SECONDS - t0)) s wall"
  printf '# %s GPUs on one node (%s), NCCL %s, torch %s, %s, NCCL_NVLS_ENABLE=0:\nbash tests/benchmarks/all_reduce_gpu.sh    # ran, among others:\n%s\n' \
    "$GPUS" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" "$NCCL" "$TORCH" "$(date -u +%F)" "$cmd" > "$dir/COMMAND"
done | tee "$OUT/runs.log"
# MPI on this machine: host buffers are for --platform cpu; on GPUs it runs only if CUDA-aware.
timeout 120 deepbench-run --local --platform nvidia --backend mpi --suite train --ops all_reduce --ranks 2 --fast \
  --limit 1 --out /tmp/mpi-gpu 2>&1 | tail -6 | tee "$OUT/mpi.log"
tar -C /tmp/published -czf "$OUT/published.tgz" . && ls -la "$OUT"
