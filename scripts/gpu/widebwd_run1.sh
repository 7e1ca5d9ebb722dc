#!/usr/bin/env bash
# widebwd (session 11 helper), GPU call 1: GPU tests of the narrow-row norm backward, then the
# kernel-alone sweep of split-row launches at 4096 x 32768, 4096 x 16411, 8192 x 65536 (bf16).
set -u
OUT="${1:?}"
mkdir -p "$OUT"
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRITON_CACHE_DIR=/tmp/tc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
timeout 100 python3 -m pytest tests/ops/test_norm_bwd_narrow.py -m gpu -q -x -p no:cacheprovider \
  > "$OUT/widebwd-gpu-tests1.txt" 2>&1
echo "tests exit $?" >> "$OUT/widebwd-gpu-tests1.txt"
SWEEP_LAUNCHES="flags/4096/4/2/1 flags/2048/4/4/1 flags/8192/8/1/1 lag/2048/4/4/0 lag/1024/4/4/0 lag/2048/8/2/0 lag/4096/4/2/0 hold/2048/8/2/0" \
  timeout 150 python3 benchmarks/norm_bwd_narrow_sweep.py sweep "$OUT/widebwd-sweep1.txt" > "$OUT/sweep.log" 2>&1
echo "sweep exit $?" >> "$OUT/sweep.log"
tail -3 "$OUT/sweep.log"
