#!/usr/bin/env bash
# Twelfth session, second call: the cross-entropy GPU tests with the aligned split forward with
# gradient (rows off 16-byte boundaries, e.g. vocab 50257), the other GPU tests of the tree
# merged in the eleventh session, then bf16 cross_entropy.fwd_bwd at 4096 x 50257 through the
# harness with WARPFORGE_CE_ALIGNED_SPLIT=0 (aligned loss-only forward + streaming backward) and
# =1 (the aligned split), each its own report.
set -uo pipefail
OUT="${1:?usage: session12_call2.sh OUT}"
mkdir -p "$OUT/keep"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
t0=$SECONDS
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs -x tests/ops/test_cross_entropy.py \
  > "$OUT/keep/gpu-tests-ce.txt" 2>&1
echo "ce gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/gpu-tests-ce.txt")"
grep -E "FAILED|Error" "$OUT/keep/gpu-tests-ce.txt" | head -5
for mode in 0 1; do
  t0=$SECONDS
  WARPFORGE_CE_ALIGNED_SPLIT=$mode SUITE_DTYPE=bf16 SUITE_SHAPE="M=4096,V=50257" SUITE_BUDGET_S=90 \
    SUITE_CEILINGS=1 SUITE_SWEEP=1 SUITE_MAX_TIME=0.3 \
    bash scripts/gpu/bench_parts.sh "$OUT/split$mode" "fwd_bwd-split$mode" "cross_entropy.fwd_bwd:80" \
    > "$OUT/split$mode.log" 2>&1
  cp "$OUT/split$mode/fwd_bwd-split$mode.json" "$OUT/keep/" 2>/dev/null
  echo "aligned split=$mode: $((SECONDS - t0)) s"
  python3 scripts/results_table.py "$OUT/keep/fwd_bwd-split$mode.json" 2>&1 | grep cross_entropy
done
t0=$SECONDS
timeout $((570 - SECONDS)) python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs \
  tests/ops/test_lean_kernels.py tests/ops/test_wide_rows.py tests/ops/test_norm_bwd_narrow.py \
  tests/ops/test_norm_split_bwd.py tests/ops/test_norm_split_fwd.py \
  tests/ops/test_row_kernels_compile.py > "$OUT/keep/gpu-tests-rest.txt" 2>&1
echo "other gpu tests: exit $? in $((SECONDS - t0)) s: $(tail -1 "$OUT/keep/gpu-tests-rest.txt")"
grep -E "^FAILED|^ERROR" "$OUT/keep/gpu-tests-rest.txt" | head -5
tar -czf "$OUT/keep/logs.tgz" -C "$OUT" --exclude=keep --exclude='*cache*' . 2>/dev/null
find "$OUT" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
