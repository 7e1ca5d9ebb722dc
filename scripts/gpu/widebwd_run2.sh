#!/usr/bin/env bash
# widebwd (session 11 helper), GPU call 2: GPU tests of the narrow-row norm backward, then the
# harness rows of the three norm backwards (bf16) at 4096 x 32768, 8192 x 65536 and
# 4096 x 16384 with the shipped NORM_BWD_NARROW table, baselines in the same run.
# Run from the carry folder, after the Liger wheel is on PYTHONPATH.
set -u
OUT="${1:?}"
mkdir -p "$OUT"
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRITON_CACHE_DIR="$OUT/triton-cache"
unset WARPFORGE_NORM_BWD_NARROW
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
timeout 90 python3 -m pytest tests/ops/test_norm_bwd_narrow.py -m gpu -q -p no:cacheprovider \
  > "$OUT/widebwd-gpu-tests.txt" 2>&1
echo "tests exit $?" >> "$OUT/widebwd-gpu-tests.txt"
tail -3 "$OUT/widebwd-gpu-tests.txt"
SUITE_CEILINGS=1 SUITE_DTYPE=bf16 SUITE_SWEEP=1 SUITE_MAX_TIME=0.3 \
  SUITE_BUDGET_S=250 SUITE_SHAPE="M=4096,N=32768 M=8192,N=65536 M=4096,N=16384" \
  bash scripts/gpu/bench_parts.sh "$OUT/h" widebwd-harness "rms_norm.bwd:90" "add_rms_norm.bwd:90" "layer_norm.bwd:90"
[ -s "$OUT/h/widebwd-harness.json" ] && cp "$OUT/h/widebwd-harness.json" "$OUT/" && python3 scripts/results_table.py "$OUT/widebwd-harness.json"
tar -czf "$OUT/widebwd-logs.tgz" -C "$OUT" --exclude='*cache*' --exclude='*.tgz' --exclude='widebwd-harness.json' . 2>/dev/null
rm -rf "$OUT/h" "$OUT/triton-cache"
