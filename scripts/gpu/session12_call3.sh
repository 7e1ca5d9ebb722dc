#!/usr/bin/env bash
# Twelfth session, third call: the cross-entropy GPU tests (the aligned split now in float32
# too), the aligned split's launches alone (benchmarks/ce_split_sweep.py), float32
# cross_entropy.fwd_bwd at 4096 x 50257 through the harness with WARPFORGE_CE_ALIGNED_SPLIT=0
# and =1, then the bf16 cross-entropy part of the issue's sweep in what time is left.
set -uo pipefail
OUT="${1:?usage: session12_call3.sh OUT}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs -x tests/ops/test_cross_entropy.py \
  > "$OUT/keep/gpu-tests-ce.txt" 2>&1
echo "ce gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/gpu-tests-ce.txt")"
grep -E "^FAILED|^ERROR|^E " "$OUT/keep/gpu-tests-ce.txt" | head -8
t0=$SECONDS
timeout 150 python3 benchmarks/ce_split_sweep.py --out "$OUT/keep" > "$OUT/sweep.log" 2>&1
echo "split sweep: exit $? in $((SECONDS - t0)) s"; tail -3 "$OUT/sweep.log"
for mode in 0 1; do
  t0=$SECONDS
  WARPFORGE_CE_ALIGNED_SPLIT=$mode SUITE_DTYPE=fp32 SUITE_SHAPE="M=4096,V=50257" SUITE_BUDGET_S=90 \
    SUITE_CEILINGS=1 SUITE_SWEEP=1 SUITE_MAX_TIME=0.3 \
    bash scripts/gpu/bench_parts.sh "$OUT/split$mode" "fwd_bwd-fp32-split$mode" \
    "cross_entropy.fwd_bwd:80" > "$OUT/split$mode.log" 2>&1
  cp "$OUT/split$mode/fwd_bwd-fp32-split$mode.json" "$OUT/keep/" 2>/dev/null
  echo "fp32 aligned split=$mode: $((SECONDS - t0)) s"
  python3 scripts/results_table.py "$OUT/keep/fwd_bwd-fp32-split$mode.json" 2>&1 | grep cross_entropy
done
left=$((575 - SECONDS))
if [ "$left" -gt 120 ]; then
  SUITE_DTYPE=bf16 SUITE_BUDGET_S=$left bash scripts/gpu/issue_sweep.sh "$OUT/ce" ce > "$OUT/ce.log" 2>&1
  cp "$OUT/ce/keep/"* "$OUT/keep/" 2>/dev/null
  grep -E "cross_entropy|rows" "$OUT/ce.log" | head -14
fi
tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
