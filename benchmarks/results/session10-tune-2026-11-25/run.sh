#!/usr/bin/env bash
# Tenth session, lead: the norm backwards at the issue's sweep shapes 32768x1024, 16384x2048 and
# 8192x8192 ran on configs of the nearest tuned shapes (65-89% of copy, session10-sweep1).
# Tune them exhaustively (bf16, fp32), compose the shipped file with the project's tools, and
# time the rows through the harness on the new file. Run from the repository root: bash THIS OUT
set -u
OUT="${1:?}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
SHIPPED=src/warpforge/tune/shipped/nvidia-h100-80gb-hbm3-sm_90.json
GRID_SHAPES="M=32768,N=1024 M=16384,N=2048 M=8192,N=8192" GRID_DTYPES="bfloat16 float32" \
  GRID_KERNELS="layer_norm.bwd rms_norm.bwd add_rms_norm.bwd" GRID_MAX_WALL=300 \
  bash scripts/gpu/tune_norm_grid.sh "$OUT/tune"
python3 scripts/tune_merge.py shipped "$OUT/shipped-new.json" "$SHIPPED" "$OUT/tune/shipped-grid.json" \
  > "$OUT/merge.log" 2>&1 && cp "$OUT/shipped-new.json" "$SHIPPED"
echo "merge: $? ($(tail -1 "$OUT/merge.log"))"
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.3 SUITE_SWEEP=1
SUITE_BUDGET_S=230 SUITE_SHAPE="M=32768,N=1024 M=16384,N=2048 M=8192,N=8192" \
  bash scripts/gpu/bench_parts.sh "$OUT/b" normbwd "layer_norm.bwd:75" "rms_norm.bwd:75" "add_rms_norm.bwd:75"
[ -s "$OUT/b/normbwd.json" ] && python3 scripts/results_table.py "$OUT/b/normbwd.json"
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz --exclude='*.db' . 2>/dev/null
