#!/usr/bin/env bash
# normsplit GPU call (run from .carry-normsplit): GPU tests of the split norm forward, kernel
# sweep (split launches against the chunked kernel), harness bf16 8192 x 262144 with the split on.
set -uo pipefail
OUT="${OUT:?}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export WARPFORGE_CACHE_DIR=/tmp/wf-cache TORCHINDUCTOR_CACHE_DIR=/tmp/ind-cache TRITON_CACHE_DIR=/tmp/tr-cache
mkdir -p "$OUT/logs"
t0=$SECONDS
timeout 75 python3 -m pytest tests/ops/test_norm_split_fwd.py -q -x -k "gpu or public" > "$OUT/logs/tests.log" 2>&1
echo "tests rc=$? $((SECONDS - t0)) s" | tee -a "$OUT/logs/steps.txt"
t0=$SECONDS
timeout 100 python3 benchmarks/norm_split_fwd.py sweep "$OUT/sweep.txt" > "$OUT/logs/sweep.log" 2>&1
echo "sweep rc=$? $((SECONDS - t0)) s" | tee -a "$OUT/logs/steps.txt"
[ -s "$OUT/sweep.txt" ] || cp "$OUT/logs/sweep.log" "$OUT/sweep.txt"
t0=$SECONDS
WARPFORGE_NORM_FWD_SPLIT=1 SUITE_BUDGET_S=${HARNESS_BUDGET:-200} SUITE_SWEEP=1 SUITE_CEILINGS=1 SUITE_DTYPE=bf16 \
  SUITE_SHAPE="M=8192,N=262144" bash scripts/gpu/bench_parts.sh /tmp/n norms \
  "rms_norm.fwd:70" "layer_norm.fwd:70" "add_rms_norm.fwd:70" > "$OUT/logs/harness.log" 2>&1
echo "harness rc=$? $((SECONDS - t0)) s" | tee -a "$OUT/logs/steps.txt"
cp /tmp/n/norms.json "$OUT/norms-split.json" 2>/dev/null
cp /tmp/n/*.log /tmp/n/summary.txt "$OUT/logs/" 2>/dev/null
python3 scripts/results_table.py "$OUT/norms-split.json" > "$OUT/logs/table.txt" 2>&1
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/sweep.txt"
