#!/usr/bin/env bash
# widebwd (session 11 helper), GPU call 1: GPU tests of the narrow-row norm backward, the
# kernel-alone sweep of split-row launches (bf16; 4096 x 32768, 8192 x 65536, 4096 x 16411),
# the dispatch table the sweep supports (scripts/gpu/widebwd_pick.py; "none" if a test
# failed), then the harness rows of the three norm backwards at 4096 x 32768, 8192 x 65536 and
# 4096 x 16384 with that table (WARPFORGE_NORM_BWD_NARROW), baselines in the same run.
# As run (commit 7a7fdbb) the sweep also timed hold/2048/8/2/0, a variant since removed; its GPU
# test failed, so the table was "none" and the harness rows are the before-state.
# Run from the carry folder, after the Liger wheel is on PYTHONPATH.
set -u
OUT="${1:?}"
mkdir -p "$OUT"
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRITON_CACHE_DIR="$OUT/triton-cache"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
timeout 75 python3 -m pytest tests/ops/test_norm_bwd_narrow.py -m gpu -q -p no:cacheprovider \
  > "$OUT/widebwd-gpu-tests.txt" 2>&1
tests=$?
echo "tests exit $tests" >> "$OUT/widebwd-gpu-tests.txt"
tail -3 "$OUT/widebwd-gpu-tests.txt"
SWEEP_SHAPES="4096x32768 8192x65536 4096x16411" \
SWEEP_LAUNCHES="flags/4096/4/2/1 flags/2048/4/4/1 lag/2048/4/4/0 lag/1024/4/4/0 lag/2048/8/2/0" \
  timeout 120 python3 benchmarks/norm_bwd_narrow_sweep.py sweep "$OUT/widebwd-sweep.txt" > "$OUT/sweep.log" 2>&1
echo "sweep exit $?" >> "$OUT/sweep.log"
table=none
if [ "$tests" != 1 ] && [ "$tests" != 2 ]; then
  table="$(python3 scripts/gpu/widebwd_pick.py "$OUT/widebwd-sweep.txt" 2>> "$OUT/pick.txt")"
fi
echo "WARPFORGE_NORM_BWD_NARROW=$table" | tee -a "$OUT/pick.txt"
WARPFORGE_NORM_BWD_NARROW="$table" SUITE_CEILINGS=1 SUITE_DTYPE=bf16 SUITE_SWEEP=1 SUITE_MAX_TIME=0.3 \
  SUITE_BUDGET_S=250 SUITE_SHAPE="M=4096,N=32768 M=8192,N=65536 M=4096,N=16384" \
  bash scripts/gpu/bench_parts.sh "$OUT/h" widebwd-harness "rms_norm.bwd:90" "add_rms_norm.bwd:90" "layer_norm.bwd:90"
[ -s "$OUT/h/widebwd-harness.json" ] && cp "$OUT/h/widebwd-harness.json" "$OUT/" && python3 scripts/results_table.py "$OUT/widebwd-harness.json"
tar -czf "$OUT/widebwd-logs.tgz" -C "$OUT" --exclude='*cache*' --exclude='*.tgz' --exclude='widebwd-harness.json' . 2>/dev/null
rm -rf "$OUT/h" "$OUT/triton-cache" "$OUT"/*.log
