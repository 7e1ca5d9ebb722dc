#!/usr/bin/env bash
# Tenth session, lead: the norm backwards at the issue's sweep shapes 32768x1024, 16384x2048 and
# 8192x8192 ran on configs of the nearest tuned shapes (65-89% of copy, session10-sweep1).
# Tune them exhaustively (bf16), compose the shipped file with the project's tools, and time the
# rows through the harness on the new file. Then re-verify (no timing) the problems whose bounds
# the session tightened (cross-entropy gradients, softmax). From the repository root: bash THIS OUT
set -u
OUT="${1:?}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
SHIPPED=src/warpforge/tune/shipped/nvidia-h100-80gb-hbm3-sm_90.json
GRID_SHAPES="M=32768,N=1024 M=16384,N=2048 M=8192,N=8192" GRID_DTYPES="bfloat16" \
  GRID_KERNELS="layer_norm.bwd rms_norm.bwd add_rms_norm.bwd" GRID_MAX_WALL=200 \
  bash scripts/gpu/tune_norm_grid.sh "$OUT/tune"
python3 scripts/tune_merge.py shipped "$OUT/shipped-new.json" "$SHIPPED" "$OUT/tune/shipped-grid.json" \
  > "$OUT/merge.log" 2>&1 && cp "$OUT/shipped-new.json" "$SHIPPED"
echo "merge: $? ($(tail -1 "$OUT/merge.log"))"
export SUITE_CEILINGS=1 SUITE_MAX_TIME=0.3 SUITE_SWEEP=1 SUITE_DTYPE=bf16
SUITE_BUDGET_S=150 SUITE_SHAPE="M=32768,N=1024 M=16384,N=2048 M=8192,N=8192" \
  bash scripts/gpu/bench_parts.sh "$OUT/b" normbwd "layer_norm.bwd:50" "rms_norm.bwd:50" "add_rms_norm.bwd:50"
[ -s "$OUT/b/normbwd.json" ] && python3 scripts/results_table.py "$OUT/b/normbwd.json"
timeout 170 python3 -m warpforge bench --verify-only --no-ceilings --sweep \
  --problem 'softmax.fwd,softmax.bwd,log_softmax.bwd,cross_entropy.bwd,cross_entropy.fwd_bwd' \
  --shape M=32768,N=256 --shape M=4096,N=16384 --shape M=8192,N=8192 --shape M=4096,N=32768 \
  --shape M=16384,V=32000 --shape M=8192,V=128256 --shape M=4096,V=262144 \
  --out "$OUT/verify.json" > "$OUT/verify.log" 2>&1
echo "verify-only: exit $?"; grep -E "rejected|error|passed" "$OUT/verify.log" | tail -5
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude='*cache*' --exclude=logs.tgz --exclude='*.db' . 2>/dev/null
